// Whether this machine can run a GPU target, asked of the driver directly
// (dlopen of libcuda.so.1 / libvulkan.so.1, device enumeration) before
// Halide's runtime is involved: Halide's Vulkan runtime aborts the process
// when there is no device, and its CUDA runtime reports a bare "CUDA API
// not found". A target that cannot run is a diagnostic naming the target
// and what is missing. Results are cached per process (one probe per API).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include <Halide.h>

#include "ropegen/result.h"

namespace ropegen::runtime {

struct DeviceInfo {
  std::string description;  // e.g. "Vulkan device llvmpipe (LLVM 15.0.6, 256 bits)"
  // The largest buffer one kernel argument may span (Vulkan's
  // maxStorageBufferRange; unlimited for CUDA and CPU targets).
  int64_t max_buffer_bytes = std::numeric_limits<int64_t>::max();
  // Device buffers are sized to a multiple of this (runtime/device_call.h).
  int64_t buffer_size_multiple = 1;
  // A kernel argument starts at a multiple of this many bytes into its
  // device buffer (Vulkan's minStorageBufferOffsetAlignment; device-resident
  // views, runtime/device_memory.h).
  int64_t offset_alignment = 1;
  // Blocks per launch along the schedules' token and batch dims
  // (targets/gpu_schedule.cpp): CUDA's grid x and y/z, Vulkan's
  // maxComputeWorkGroupCount x and z. A block holds at least one token.
  int64_t max_token_blocks = std::numeric_limits<int32_t>::max();
  int64_t max_batch_blocks = 65535;
  // What the device adds to a target that names none: its CUDA capability
  // or Vulkan version (FeatureEnd: nothing).
  Halide::Target::Feature version_feature = Halide::Target::FeatureEnd;
};

// CPU targets always succeed with the defaults.
Result<DeviceInfo> probe_device(const Halide::Target& target);

// `target` with the device's CUDA capability or Vulkan version added when
// it names none (the kernels then use what the device has); unchanged for
// CPU targets or when the device cannot run it.
Halide::Target with_device_version(const Halide::Target& target);

// A target name as the user wrote it (targets/target_names.h), checked to
// run here, with the device's CUDA capability or Vulkan version added when
// the name gives none.
Result<Halide::Target> runnable_target(const std::string& name);

}  // namespace ropegen::runtime
