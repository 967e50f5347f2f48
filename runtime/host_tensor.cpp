#include "host_tensor.h"

#include <cstring>

#include "call/contract.h"
#include "lowering/rope_algorithm.h"

namespace ropegen::runtime {

HostStorage::HostStorage(DType dtype, size_t elements)
    : dtype_(dtype), elements_(elements), bytes_(elements * (dtype == DType::F32 ? 4 : 2)) {}

ElementType HostStorage::element_type() const { return call::element_type_of(dtype_); }

HostStorage to_storage(const std::vector<float>& values, DType dtype) {
  HostStorage s(dtype, values.size());
  if (dtype == DType::F32) {
    if (!values.empty()) std::memcpy(s.data(), values.data(), values.size() * 4);  // empty: no pointers to pass
  } else if (dtype == DType::F16) {
    auto* out = static_cast<Halide::float16_t*>(s.data());
    for (size_t i = 0; i < values.size(); ++i) out[i] = Halide::float16_t(values[i]);
  } else {
    auto* out = static_cast<Halide::bfloat16_t*>(s.data());
    for (size_t i = 0; i < values.size(); ++i) out[i] = Halide::bfloat16_t(values[i]);
  }
  return s;
}

std::vector<float> HostStorage::to_float() const {
  std::vector<float> out(elements_);
  const void* p = bytes_.data();
  if (dtype_ == DType::F32) {
    if (elements_ > 0) std::memcpy(out.data(), p, elements_ * 4);  // empty: no pointers to pass
  } else if (dtype_ == DType::F16)
    for (size_t i = 0; i < elements_; ++i) out[i] = static_cast<float>(static_cast<const Halide::float16_t*>(p)[i]);
  else
    for (size_t i = 0; i < elements_; ++i) out[i] = static_cast<float>(static_cast<const Halide::bfloat16_t*>(p)[i]);
  return out;
}

}  // namespace ropegen::runtime
