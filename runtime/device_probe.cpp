#include "device_probe.h"

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "runtime/gpu_probes.h"
#include "targets/target_names.h"

namespace ropegen::runtime {
namespace {

using Halide::Target;

// One probe per API per process: drivers do not come and go while it runs.
const ProbeResult& cached_probe(Target::Feature api) {
  static std::mutex mutex;
  static std::map<Target::Feature, ProbeResult> results;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = results.find(api);
  if (it == results.end()) it = results.emplace(api, api == Target::CUDA ? probe_cuda() : probe_vulkan()).first;
  return it->second;
}

bool names_version(const Target& t) {
  for (auto f : {Target::CUDACapability30, Target::CUDACapability32, Target::CUDACapability35, Target::CUDACapability50,
                 Target::CUDACapability61, Target::CUDACapability70, Target::CUDACapability75, Target::CUDACapability80,
                 Target::CUDACapability86, Target::VulkanV10, Target::VulkanV12, Target::VulkanV13})
    if (t.has_feature(f)) return true;
  return false;
}

}  // namespace

Result<DeviceInfo> probe_device(const Target& target) {
  if (!target.has_gpu_feature()) return DeviceInfo{};
  const Target::Feature api = target.has_feature(Target::CUDA) ? Target::CUDA : Target::Vulkan;
  const ProbeResult& r = cached_probe(api);
  if (const auto* why = std::get_if<std::string>(&r))
    return named_error("target", fmt::format("target `{}` cannot run on this machine: {}", target.to_string(), *why));
  return std::get<DeviceInfo>(r);
}

Result<Target> runnable_target(const std::string& name) {
  Result<Target> target = targets::parse_target(name);
  if (!target) return target.errors();
  if (!target->has_gpu_feature()) return target;
  Result<DeviceInfo> device = probe_device(*target);
  if (!device) {
    // Name the target as the user wrote it.
    std::vector<Diagnostic> errors = device.errors();
    for (Diagnostic& d : errors) {
      const std::string written = "target `" + target->to_string() + "`";
      if (d.message.rfind(written, 0) == 0) d.message = "target `" + name + "`" + d.message.substr(written.size());
    }
    return errors;
  }
  return with_device_version(*target);
}

Target with_device_version(const Target& target) {
  if (!target.has_gpu_feature() || names_version(target)) return target;
  const Result<DeviceInfo> device = probe_device(target);
  if (!device || device->version_feature == Target::FeatureEnd) return target;
  return target.with_feature(device->version_feature);
}

}  // namespace ropegen::runtime
