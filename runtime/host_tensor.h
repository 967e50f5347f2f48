// Host memory in a spec's storage dtype (f32, f16, bf16), converted from and
// to float32 with one rounding (round to nearest even).
#pragma once

#include <vector>

#include <Halide.h>

#include "ropegen/spec.h"
#include "ropegen/tensor.h"

namespace ropegen::runtime {

class HostStorage {
 public:
  HostStorage(DType dtype, size_t elements);
  void* data() { return bytes_.data(); }
  ElementType element_type() const;
  size_t elements() const { return elements_; }
  HostStorage empty_like() const { return HostStorage(dtype_, elements_); }
  std::vector<float> to_float() const;

 private:
  DType dtype_;
  size_t elements_;
  std::vector<unsigned char> bytes_;
  friend HostStorage to_storage(const std::vector<float>& values, DType dtype);
};

HostStorage to_storage(const std::vector<float>& values, DType dtype);

}  // namespace ropegen::runtime
