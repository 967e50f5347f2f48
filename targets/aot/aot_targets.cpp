#include "aot_targets.h"

#include <algorithm>

#include <fmt/format.h>

#include "targets/target_names.h"

namespace ropegen::targets::aot {
namespace {

using Halide::Target;

Diagnostic error(std::string message) { return Diagnostic{{"--targets", -1, -1}, std::move(message), {}}; }

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

}  // namespace

std::string architecture_name(const Target& t) {
  std::string s = os_arch_bits(t);
  return s.substr(0, s.rfind('-'));
}

Result<std::vector<AotTarget>> parse_aot_targets(const std::string& list) {
  std::vector<Target> wanted;
  std::vector<Diagnostic> errors;
  for (const std::string& name : split(list)) {
    if (name.empty()) {
      errors.push_back(error(fmt::format("--targets `{}` has an empty entry; write e.g. host or "
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
      for (Diagnostic d : t.errors()) errors.push_back(error(d.message));
      continue;
    }
    if (t->has_gpu_feature()) {
      // A C caller would have to stage its tensors as runtime/device_call.h
      // does (Halide 21's Vulkan allocator, device copies): not yet.
      errors.push_back(error(fmt::format("target `{}` is a GPU target: AOT libraries hold CPU targets only for now; "
                                         "run GPU kernels with `rope-gen apply` or `rope-gen bench --target {}`",
                                         name, name)));
      continue;
    }
    wanted.push_back(*t);
  }
  if (!errors.empty()) return errors;
  if (wanted.empty()) return error("--targets is empty; write host or a list of Halide targets");

  const Target& base = wanted.back();
  for (const Target& t : wanted) {
    if (t.os != base.os || t.arch != base.arch || t.bits != base.bits)
      return error(fmt::format("--targets mixes {} and {}: one library holds one architecture and OS; "
                               "run rope-gen build once per architecture",
                               os_arch_bits(t), os_arch_bits(base)));
    if (auto f = abi_changing_feature(t))
      return error(fmt::format("target `{}` has feature `{}`, which changes the generated C interface; "
                               "remove it",
                               t.to_string(), *f));
    for (auto f : kMustMatch)
      if (t.has_feature(f) != base.has_feature(f))
        return error(fmt::format("feature `{}` must be on every target or none (it is on some)",
                                 Target::feature_to_name(f)));
  }

  std::vector<AotTarget> out;
  for (const Target& t : wanted) {
    std::string suffix = t.to_string();
    std::replace(suffix.begin(), suffix.end(), '-', '_');
    for (const AotTarget& seen : out)
      if (seen.suffix == suffix)
        return error(fmt::format("target `{}` is listed twice; each feature level once", t.to_string()));
    out.push_back({t.with_feature(Target::NoRuntime), suffix});
  }
  return out;
}

Target runtime_target(const std::vector<AotTarget>& targets) {
  const Target& base = targets.back().target;
  Target rt(base.os, base.arch, base.bits);
  for (int i = 0; i < Target::FeatureEnd; ++i) {
    const auto f = static_cast<Target::Feature>(i);
    if (f == Target::NoRuntime) continue;
    const bool everywhere = std::all_of(targets.begin(), targets.end(),
                                        [&](const AotTarget& t) { return t.target.has_feature(f); });
    if (everywhere) rt.set_feature(f);
  }
  return rt;
}

}  // namespace ropegen::targets::aot
