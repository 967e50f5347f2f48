// The target list of an AOT library (`rope-gen build --targets ...`): CPU
// targets of one architecture, several feature levels, picked at run time
// by Halide's multi-target dispatch (the last is the baseline: it is called
// whenever no earlier one can run on the machine, so it must run everywhere
// the library is meant to), and at most one CUDA and one Vulkan target,
// whose kernels run the calls whose tensors are on that device.
#pragma once

#include <string>
#include <vector>

#include <Halide.h>

#include "ropegen/result.h"
#include "ropegen/tensor.h"

namespace ropegen::targets::aot {

struct AotTarget {
  // As compiled: with no_runtime (the runtime is emitted once, separately);
  // GPU targets also with user_context (the call's device and stream reach
  // the runtime's CUDA hooks through it: call/device_context.h).
  Halide::Target target;
  std::string suffix;  // names this target's objects and sub-functions, e.g. x86_64_linux_avx2_fma_f16c_sse41, cuda
  DeviceType device = DeviceType::CPU;  // the tensors whose calls it runs
};

struct AotTargets {
  std::vector<AotTarget> cpu;  // dispatch order; the last is the baseline; never empty
  std::vector<AotTarget> gpu;  // at most one per device type: CUDA, then Vulkan
  // The CPU targets, then the GPU targets.
  std::vector<AotTarget> all() const;
  const AotTarget* for_device(DeviceType device) const;  // a GPU target; nullptr: none
};

// The CUDA capability `cuda` means in an AOT library: the lowest that every
// GPU rope-gen is meant for has (sm_80: A100; A10/RTX 30 sm_86, L4/RTX 40
// sm_89 and H100/H200 sm_90 run its PTX through the driver's JIT).
inline constexpr Halide::Target::Feature kAotCudaCapability = Halide::Target::CUDACapability80;

// "host,cuda,vulkan" or Halide target strings, comma-separated. On x86-64,
// `host` means the dispatch set avx512_zen4, avx512_skylake, avx2, sse41,
// baseline x86-64; `cuda` is CUDA at kAotCudaCapability; `vulkan` Vulkan with
// the features rope-gen's kernels need (targets/target_names.h). A GPU
// target's host code is compiled for the baseline CPU target (its own CPU
// features are dropped): only its GPU API and that API's features count.
// Errors: unknown names, GPU APIs without a schedule, no CPU target (a GPU
// target's host code and CPU tensors need one), two targets of one GPU API,
// mixed architectures/OS/bits, duplicates, features that would change the
// C calling convention.
Result<AotTargets> parse_aot_targets(const std::string& list);

// The target of the Halide runtime object: only the features every CPU
// target has, so it runs wherever the baseline does, plus each GPU target's
// API and features (one runtime serves every target in the archive).
Halide::Target runtime_target(const AotTargets& targets);

// "x86-64" or "arm-64" (what manifest.json and error messages call it).
std::string architecture_name(const Halide::Target& target);

}  // namespace ropegen::targets::aot
