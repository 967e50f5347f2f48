// Target names as users write them (--target host, --targets host,arm-64-linux)
// and the Halide targets they mean.
#pragma once

#include <string>

#include <Halide.h>

#include "ropegen/result.h"

namespace ropegen::targets {

// "host" is the machine rope-gen runs on; "cuda" and "vulkan" are its CPU
// plus that GPU API (CUDA capability and Vulkan version are filled in from
// the device when a kernel runs: runtime/device_probe.h); anything else is
// a Halide target string (x86-64-linux-avx2, arm-64-linux,
// host-cuda-cuda_capability_80, host-vulkan-vk_float64, ...); Vulkan targets
// get the features every kernel needs (vk_float64, vk_int64, 16-bit types).
// Only CUDA and Vulkan among Halide's GPU APIs have a schedule. Checks the
// name only: no driver or device is needed to compile for a GPU.
Result<Halide::Target> parse_target(const std::string& name);

}  // namespace ropegen::targets
