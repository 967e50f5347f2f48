// Device-resident tensors: where a call's tensors may live on a GPU so that
// rope-gen's kernels run on them in place, with no copy (tensors in host
// memory on a GPU target are staged: copied to the device and back, per call).
//
// CUDA: pass your own device memory (cudaMalloc, PyTorch's CUDA tensors):
// Tensor::data = the device pointer of the first element, device =
// Device{CUDA, ordinal}. Kernels run in the device's primary context (the one
// the CUDA runtime and PyTorch use) on Call::stream (nullptr: the legacy
// default stream), asynchronously: every tensor is the caller's to keep
// alive until the stream has run them. The first call on a device loads the
// kernels' module (a synchronisation). After it, a call launches kernels and
// nothing else, hence can be captured in a CUDA graph, when its pipeline
// computes nothing on the host: today that is frequency scheme `table`; the
// other schemes' GPU pipelines compute their frequency table on the host and
// copy it to a device buffer of their own at every call
// (targets/gpu_schedule.cpp), which allocates and synchronises. q, k and the
// rotary parts of out_q and out_k must start at 16-byte aligned addresses
// (the kernels move them in 16-byte vectors). Halide 21 loads the driver as
// "libcuda.so"; see runtime.h for how rope-gen finds libcuda.so.1.
//
// Vulkan: Halide 21, which runs rope-gen's kernels, cannot wrap a VkBuffer of
// yours (halide/Halide#8943) nor run on your VkDevice (#8715): device tensors
// on Vulkan are memory that rope-gen allocates on the VkDevice of Halide's
// runtime in this process, below (Device{Vulkan, 0}: Halide uses one device,
// chosen as its runtime does: HL_VK_DEVICE_TYPE, else the first GPU). Use
// data() + byte offset as Tensor::data for views into it (fused qkv slices,
// a packed batch): every view a kernel binds (a tensor's first element; for
// rope outputs the first rotary dim) must start at a multiple of the
// device's minStorageBufferOffsetAlignment bytes into its allocation (16 on
// lavapipe, 4 to 64 on GPUs), else the call is refused saying so. Calls are
// synchronous (Halide's Vulkan runtime waits for every dispatch).
//
// Either way, values in device memory (position ids, cu_seqlens, run-time
// frequencies, the KV-cache indices) are not checked: they are the caller's
// to keep valid, as with FlashInfer's and vLLM's kernels (an invalid id
// gives wrong values, never an access outside the call's tensors).
#pragma once

#include <cstddef>
#include <memory>

#include "ropegen/result.h"
#include "ropegen/tensor.h"

namespace ropegen {

// Memory rope-gen allocated on a device (Vulkan only: CUDA tensors are the
// caller's own memory), freed by the destructor: after the last call that
// uses it, and before the process exits (not from a static destructor).
class DeviceMemory {
 public:
  // `bytes` (> 0) on `device`. Vulkan: at most the device's
  // maxStorageBufferRange and 2^31 - 256 bytes (a kernel argument is bound
  // from its first byte to the end of its allocation). A diagnostic says why
  // not (no Vulkan device, CUDA, out of device memory, ...).
  static Result<DeviceMemory> allocate(Device device, size_t bytes);

  DeviceMemory();  // holds nothing
  DeviceMemory(DeviceMemory&&) noexcept;
  DeviceMemory& operator=(DeviceMemory&&) noexcept;
  ~DeviceMemory();

  // Where byte 0 is, for Tensor::data (data() + n: byte n). An address in
  // this process reserved for the allocation, with no access: never
  // dereference it. nullptr when the object holds nothing.
  void* data() const;
  size_t size() const;
  Device device() const;

  // Copies `bytes` between host memory and bytes [offset, offset + bytes)
  // of this allocation (any offset), waiting for the copy to finish.
  Status copy_from_host(const void* source, size_t bytes, size_t offset = 0);
  Status copy_to_host(void* destination, size_t bytes, size_t offset = 0) const;

  struct Allocation;  // rope-gen's runtime's

 private:
  explicit DeviceMemory(std::unique_ptr<Allocation> allocation);
  std::unique_ptr<Allocation> allocation_;
};

}  // namespace ropegen
