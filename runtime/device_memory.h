// ropegen::DeviceMemory (include/ropegen/device_memory.h) on Vulkan: device
// buffers of Halide's JIT Vulkan runtime (halide_device_malloc through its
// device interface), the addresses that stand for them, and the device
// handles a call's views of them need.
//
// A Vulkan device handle is not an address (Halide's runtime hands out its
// own MemoryRegion), and Halide 21 can neither wrap a VkBuffer it did not
// allocate (halide/Halide#8943) nor use the application's VkDevice (#8715).
// So each allocation reserves a range of this process's address space with
// no access (PROT_NONE: a host access to it faults) whose addresses stand
// for its bytes: data() + n is byte n, a Tensor::data like any device
// pointer, checked and moved by call/ as such. Before a launch, each view's
// address becomes a Halide crop of its allocation at that byte offset
// (Vulkan binds the storage buffer there, at a multiple of the device's
// minStorageBufferOffsetAlignment), released after it (VulkanViews).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <HalideRuntime.h>

#include "call/parts.h"
#include "ropegen/device_memory.h"

namespace ropegen::runtime {

// A device call's views on Vulkan, bound for one launch: each view's address
// replaced by a crop of the rope-gen allocation it lies in, released on
// destruction (Halide's Vulkan runtime waits for every dispatch, so the
// crops outlive the kernels that use them).
class VulkanViews {
 public:
  // `alignment`: the device's minStorageBufferOffsetAlignment.
  explicit VulkanViews(int64_t alignment) : alignment_(alignment) {}
  VulkanViews(const VulkanViews&) = delete;
  VulkanViews& operator=(const VulkanViews&) = delete;
  ~VulkanViews();

  // Throws KernelFailure naming `name` when `view` (a device-only view of a
  // device call) is not rope-gen Vulkan memory of the same Halide runtime,
  // reaches outside its allocation, or starts at an offset the device
  // cannot bind.
  void bind(call::RawBuffer& view, const std::string& name);

 private:
  struct Crop {
    uint64_t handle;
    const halide_device_interface_t* interface;
  };
  int64_t alignment_;
  std::vector<Crop> crops_;
};

}  // namespace ropegen::runtime
