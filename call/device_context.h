// What the GPU entry points of an AOT library get as Halide's user_context
// (they are compiled with Target::UserContext; argv_entry passes it first):
// the call's device and CUDA stream, read by the library's CUDA runtime
// hooks (targets/aot/device_hooks/cuda_hooks.cpp) when Halide's runtime
// asks for a context and a stream. Halide's runtime also calls those hooks
// with user_context NULL (or a caller's own pointer, from its public
// functions): device_context() then answers nullptr and the hooks use
// device 0 and the legacy default stream.
#pragma once

#include <cstdint>

namespace ropegen::call {

struct DeviceContext {
  static constexpr uint32_t kMagic = 0x44504752u;  // "RGPD"
  uint32_t magic = kMagic;
  int32_t device_type = 0;  // ROPEGEN_DEVICE_*
  int32_t device_id = 0;
  void* stream = nullptr;   // CUDA: the CUstream kernels are launched on; nullptr: the legacy default stream
};

inline const DeviceContext* device_context(const void* user_context) {
  const auto* c = static_cast<const DeviceContext*>(user_context);
  return c && c->magic == DeviceContext::kMagic ? c : nullptr;
}

}  // namespace ropegen::call
