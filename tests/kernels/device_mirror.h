// Host buffers mirrored on a GPU target's device, for device calls in the
// kernel tests: a host tensor's data inside a mirrored buffer maps to the
// same byte offset in its device copy (so views into one buffer, fused qkv,
// stay views into one allocation). Vulkan: rope-gen's DeviceMemory. CUDA:
// the driver's cuMemAlloc in device 0's primary context (libcuda.so.1 by
// dlopen, as rope-gen), whose copies wait for the legacy default stream the
// kernels run on.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <Halide.h>

#include "ropegen/call.h"

namespace ropegen::test {

class DeviceMirror {
 public:
  explicit DeviceMirror(const Halide::Target& target);
  ~DeviceMirror();

  // Copies bytes [host, host + bytes) to a device buffer of their own.
  void add(const void* host, size_t bytes);
  // `t` on the device: its data moved into the copy of the buffer holding
  // it (a test failure and nullptr data when none does).
  ropegen::Tensor on_device(const ropegen::Tensor& t) const;
  // Every tensor of `c` on the device.
  Call on_device(const Call& c) const;
  // Copies every buffer back over its host bytes.
  void copy_back() const;

  struct Buffer;

 private:
  Halide::Target target_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace ropegen::test
