// Python arguments as tensors, refused with a message naming the argument
// and what it needs (not nanobind's signature dump): numpy arrays and torch
// CPU tensors through DLPack, never copied or converted (an output that was
// copied would be written in vain), or DLPack capsules (what ropegen.torch
// passes: torch's C exporter costs a tenth of __dlpack__). Inputs may be
// read-only; outputs not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "ropegen/spec.h"

namespace ropegen::python {

// Any device: the library's prepare_call says which it can run on.
using Input = nanobind::ndarray<nanobind::ro>;
using Output = nanobind::ndarray<>;

Input input(nanobind::handle h, const std::string& name);
Output output(nanobind::handle h, const std::string& name);
std::optional<Input> optional_input(nanobind::handle h, const std::string& name);
std::optional<Output> optional_output(nanobind::handle h, const std::string& name);
int64_t integer(nanobind::handle h, const std::string& name);

// float32, bfloat16, int64, ... as numpy and torch spell them.
std::string dtype_name(nanobind::dlpack::dtype d);
// Raises ValueError naming the tensor's dtype when it is not the spec's.
void check_dtype(const RopeSpec& spec, const nanobind::dlpack::dtype& have, const std::string& name);

template <typename T>
std::vector<int64_t> shape_of(const T& t) {
  std::vector<int64_t> s(t.ndim());
  for (size_t i = 0; i < t.ndim(); ++i) s[i] = static_cast<int64_t>(t.shape(i));
  return s;
}
template <typename T>
std::vector<int64_t> strides_of(const T& t) {
  std::vector<int64_t> s(t.ndim());
  for (size_t i = 0; i < t.ndim(); ++i) s[i] = t.stride(i);
  return s;
}

}  // namespace ropegen::python
