#include "aot_targets.h"

#include <algorithm>

#include <fmt/format.h>

#include "targets/target_names.h"

namespace ropegen::targets::aot {
namespace {

using Halide::Target;

// x86-64 machines differ most in vector width, so `host` there is a
// dispatch set from the widest to the baseline every x86-64 CPU runs.
std::vector<Target> expand_host() {
  const Target host = Halide::get_host_target();
  if (host.arch != Target::X86 || host.bits != 64) return {host};
  using F = Target::Feature;
  const std::vector<std::vector<F>> levels = {
      // Zen4 adds AVX512-BF16: one-instruction bf16 stores.
      {F::AVX512_Zen4, F::AVX512_Skylake, F::AVX2, F::FMA, F::F16C, F::SSE41},
      {F::AVX512_Skylake, F::AVX2, F::FMA, F::F16C, F::SSE41},
      {F::AVX2, F::FMA, F::F16C, F::SSE41},
      {F::SSE41},
      {},
  };
  std::vector<Target> out;
  for (const auto& features : levels) out.emplace_back(host.os, Target::X86, 64, features);
  return out;
}

// Every comma separates two entries: "a," has an empty second one.
std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t comma = list.find(',', start);
    std::string part = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    parts.push_back(part);
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

std::string os_arch_bits(const Target& t) {
  std::string s = t.without_feature(Target::NoRuntime).to_string();
  // to_string() is arch-bits-os[-features]; keep the first three fields.
  size_t cut = 0;
  for (int dashes = 0; cut != std::string::npos && dashes < 3; ++dashes) cut = s.find('-', cut + 1);
  return s.substr(0, cut);
}

// Features that change the generated function's C signature or symbol
// names: the header could not call such a library.
std::optional<std::string> abi_changing_feature(const Target& t) {
  for (auto f : {Target::JIT, Target::UserContext, Target::CPlusPlusMangling})
    if (t.has_feature(f)) return Target::feature_to_name(f);
  return std::nullopt;
}

// Halide's compile_multitarget needs these identical across targets.
const Target::Feature kMustMatch[] = {Target::Debug, Target::ASAN, Target::MSAN, Target::TSAN, Target::SanitizerCoverage};

// What a GPU target contributes beyond the CPU code around its kernels.
const Target::Feature kGpuFeatures[] = {
    Target::CUDA,           Target::CUDACapability30, Target::CUDACapability32, Target::CUDACapability35,
    Target::CUDACapability50, Target::CUDACapability61, Target::CUDACapability70, Target::CUDACapability75,
    Target::CUDACapability80, Target::CUDACapability86, Target::Vulkan,           Target::VulkanInt8,
    Target::VulkanInt16,    Target::VulkanInt64,      Target::VulkanFloat16,    Target::VulkanFloat64,
    Target::VulkanV10,      Target::VulkanV12,        Target::VulkanV13,
};

// A GPU target as an AOT library compiles it: the baseline CPU target (its
// host code runs wherever the library does), the GPU API and its features,
// user_context (call/device_context.h), no_runtime. CUDA without a
// capability gets kAotCudaCapability (Halide's default, sm_20, predates bf16).
Target gpu_target(const Target& named, const Target& baseline) {
  Target t = baseline.without_feature(Target::NoRuntime);
  for (Target::Feature f : kGpuFeatures)
    if (named.has_feature(f)) t.set_feature(f);
  if (t.has_feature(Target::CUDA) && named.get_cuda_capability_lower_bound() < 30) t.set_feature(kAotCudaCapability);
  return t.with_feature(Target::UserContext).with_feature(Target::NoRuntime);
}

}  // namespace

std::string architecture_name(const Target& t) {
  std::string s = os_arch_bits(t);
  return s.substr(0, s.rfind('-'));
}

std::vector<AotTarget> AotTargets::all() const {
  std::vector<AotTarget> out = cpu;
  out.insert(out.end(), gpu.begin(), gpu.end());
  return out;
}

const AotTarget* AotTargets::for_device(DeviceType device) const {
  for (const AotTarget& t : gpu)
    if (t.device == device) return &t;
  return nullptr;
}

Result<AotTargets> parse_aot_targets(const std::string& list) {
  std::vector<Target> wanted, gpu_wanted;
  std::vector<std::string> gpu_names;
  std::vector<Diagnostic> errors;
  for (const std::string& name : split(list)) {
    if (name.empty()) {
      errors.push_back(
          named_error("--targets", fmt::format("--targets `{}` has an empty entry; write e.g. host, host,cuda or "
                                               "x86-64-linux-avx2,x86-64-linux",
                                               list)));
      continue;
    }
    if (name == "host") {
      for (const Target& t : expand_host()) wanted.push_back(t);
      continue;
    }
    Result<Target> t = parse_target(name);
    if (!t) {
      for (Diagnostic d : t.errors()) errors.push_back(named_error("--targets", d.message));
      continue;
    }
    if (t->has_gpu_feature()) gpu_wanted.push_back(*t), gpu_names.push_back(name);
    else wanted.push_back(*t);
  }
  if (!errors.empty()) return errors;
  if (wanted.empty() && gpu_wanted.empty())
    return named_error("--targets", "--targets is empty; write host or a list of Halide targets");
  if (wanted.empty())
    return named_error("--targets",
                       fmt::format("--targets `{}` has no CPU target: a library needs one for the host side of its GPU "
                                   "kernels (and its CPU tensors); write host,{} (or x86-64-linux,{} for the smallest "
                                   "library)",
                                   list, list, list));

  const Target& base = wanted.back();
  for (const Target& t : wanted) {
    if (t.os != base.os || t.arch != base.arch || t.bits != base.bits)
      return named_error("--targets",
                         fmt::format("--targets mixes {} and {}: one library holds one architecture and OS; "
                                     "run rope-gen build once per architecture",
                                     os_arch_bits(t), os_arch_bits(base)));
    if (auto f = abi_changing_feature(t))
      return named_error("--targets",
                         fmt::format("target `{}` has feature `{}`, which changes the generated C interface; "
                                     "remove it",
                                     t.to_string(), *f));
    for (auto f : kMustMatch)
      if (t.has_feature(f) != base.has_feature(f))
        return named_error("--targets", fmt::format("feature `{}` must be on every target or none (it is on some)",
                                                    Target::feature_to_name(f)));
  }

  AotTargets out;
  for (const Target& t : wanted) {
    std::string suffix = t.to_string();
    std::replace(suffix.begin(), suffix.end(), '-', '_');
    for (const AotTarget& seen : out.cpu)
      if (seen.suffix == suffix)
        return named_error("--targets",
                           fmt::format("target `{}` is listed twice; each feature level once", t.to_string()));
    out.cpu.push_back({t.with_feature(Target::NoRuntime), suffix, DeviceType::CPU});
  }
  for (size_t i = 0; i < gpu_wanted.size(); ++i) {
    const Target& t = gpu_wanted[i];
    const std::string& name = gpu_names[i];
    if (t.os != base.os || t.arch != base.arch || t.bits != base.bits)
      return named_error("--targets",
                         fmt::format("--targets mixes {} and {}: a GPU target's host code runs on the library's CPU "
                                     "(the baseline, {})",
                                     os_arch_bits(t), os_arch_bits(base), base.to_string()));
    if (auto f = abi_changing_feature(t))
      return named_error(
          "--targets",
          fmt::format("target `{}` has feature `{}`: rope-gen sets what GPU kernels need; remove it", name, *f));
    const DeviceType device = t.has_feature(Target::CUDA) ? DeviceType::CUDA : DeviceType::Vulkan;
    if (out.for_device(device))
      return named_error(
          "--targets", fmt::format("--targets has two {0} targets; a library holds one per GPU API (`{0}` alone: {1})",
                                   to_string(device),
                                   device == DeviceType::CUDA ? "sm_80 PTX, run by sm_80 .. sm_90 GPUs"
                                                              : "Vulkan with the features rope-gen needs"));
    out.gpu.push_back({gpu_target(t, base), to_string(device), device});
  }
  // CUDA first, then Vulkan, whatever the order written.
  std::sort(out.gpu.begin(), out.gpu.end(),
            [](const AotTarget& a, const AotTarget& b) { return a.device == DeviceType::CUDA && b.device != DeviceType::CUDA; });
  return out;
}

Target runtime_target(const AotTargets& targets) {
  const Target& base = targets.cpu.back().target;
  Target rt(base.os, base.arch, base.bits);
  for (int i = 0; i < Target::FeatureEnd; ++i) {
    const auto f = static_cast<Target::Feature>(i);
    if (f == Target::NoRuntime) continue;
    const bool everywhere = std::all_of(targets.cpu.begin(), targets.cpu.end(),
                                        [&](const AotTarget& t) { return t.target.has_feature(f); });
    if (everywhere) rt.set_feature(f);
  }
  for (const AotTarget& g : targets.gpu)
    for (Target::Feature f : kGpuFeatures)
      if (g.target.has_feature(f)) rt.set_feature(f);
  return rt;
}

}  // namespace ropegen::targets::aot
