#include "target_names.h"

#include <fmt/format.h>

namespace ropegen::targets {
namespace {

using Halide::Target;

// Halide expands a leading "host" itself, and for host-cuda / host-vulkan
// also asks the GPU driver for its capability — which aborts the process
// when Vulkan has no device. rope-gen asks the driver itself, politely
// (runtime/device_probe), so "host" is spelled out here instead.
std::string expand_host(const std::string& name) {
  if (name != "host" && name.rfind("host-", 0) != 0) return name;
  return Halide::get_host_target().to_string() + name.substr(4);
}

// GPU device APIs with a schedule (targets/gpu_schedule.cpp).
bool has_unsupported_gpu_api(const Target& t) {
  for (auto f : {Target::OpenCL, Target::Metal, Target::D3D12Compute, Target::WebGPU})
    if (t.has_feature(f)) return true;
  return false;
}

// The features every kernel needs on Vulkan: the angle and its reduction
// are float64 and the quadrant an int64 (lowering/trig.cpp); f16 storage is
// float16, bf16 storage 16-bit words, fp8 KV caches 8-bit codes (Halide
// declares a capability in a kernel's SPIR-V only where the kernel uses
// the type).
Target with_required_gpu_features(Target t) {
  if (t.has_feature(Target::Vulkan))
    for (auto f : {Target::VulkanFloat64, Target::VulkanInt64, Target::VulkanInt16, Target::VulkanFloat16,
                   Target::VulkanInt8})
      t.set_feature(f);
  return t;
}

}  // namespace

Result<Target> parse_target(const std::string& name) {
  if (name == "host") return Halide::get_host_target();
  if (name == "cuda") return Halide::get_host_target().with_feature(Target::CUDA);
  if (name == "vulkan") return with_required_gpu_features(Halide::get_host_target().with_feature(Target::Vulkan));
  const std::string expanded = expand_host(name);
  if (!Target::validate_target_string(expanded))
    return named_error("target", fmt::format("unknown target `{}`; use host, cuda, vulkan or a Halide target such as "
                                             "x86-64-linux-avx2, arm-64-linux or host-cuda-cuda_capability_80",
                                             name));
  Target t;
  try {
    t = Target(expanded);
  } catch (const Halide::CompileError& e) {  // e.g. a feature of another architecture (x86-64-linux-sve2)
    std::string why = e.what();
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return named_error("target", fmt::format("target `{}` is not valid: {}", name, why));
  }
  if (has_unsupported_gpu_api(t))
    return named_error("target", fmt::format("target `{}`: rope-gen has GPU schedules for cuda and vulkan only", name));
  if (t.has_feature(Target::CUDA) && t.has_feature(Target::Vulkan))
    return named_error("target", fmt::format("target `{}` names two GPU APIs; pick cuda or vulkan", name));
  return with_required_gpu_features(t);
}

}  // namespace ropegen::targets
