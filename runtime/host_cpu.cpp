#include "host_cpu.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ropegen::runtime {
namespace {

using Halide::Target;

// Instruction-set features: code using them faults on a CPU without them.
// (The others, such as no_asserts, large_buffers or GPU APIs, change what
// is generated, not which instructions the CPU must have.)
constexpr Target::Feature kCpuFeatures[] = {
    Target::SSE41, Target::AVX, Target::AVX2, Target::AVXVNNI, Target::FMA, Target::FMA4, Target::F16C,
    Target::AVX512, Target::AVX512_KNL, Target::AVX512_Skylake, Target::AVX512_Cannonlake,
    Target::AVX512_SapphireRapids, Target::AVX512_Zen4, Target::AVX512_Zen5, Target::AVX10_1, Target::X86APX,
    Target::ARMv7s, Target::ARMDotProd, Target::ARMFp16, Target::SVE, Target::SVE2, Target::ARMv8a, Target::ARMv81a,
    Target::ARMv82a, Target::ARMv83a, Target::ARMv84a, Target::ARMv85a, Target::ARMv86a, Target::ARMv87a,
    Target::ARMv88a, Target::ARMv89a, Target::VSX, Target::POWER_ARCH_2_07, Target::RVV, Target::HVX, Target::HVX_128,
    Target::HVX_v62, Target::HVX_v65, Target::HVX_v66, Target::HVX_v68, Target::WasmSimd128, Target::WasmThreads,
    Target::WasmBulkMemory};

std::string platform(const Target& t) { return Target(t.os, t.arch, t.bits).to_string(); }

}  // namespace

std::optional<Diagnostic> host_cpu_cannot_run(const Target& target) {
  const Target host = Halide::get_host_target();
  if (target.arch != host.arch || target.bits != host.bits || target.os != host.os)
    return named_error(
        "target", fmt::format("target `{}` is for {} but this machine is {}: its kernels cannot run here (`rope-gen "
                              "build` still compiles for it)",
                              target.to_string(), platform(target), platform(host)));
  std::vector<std::string> missing;
  for (Target::Feature f : kCpuFeatures)
    if (target.has_feature(f) && !host.has_feature(f)) missing.push_back(Target::feature_to_name(f));
  if (!missing.empty())
    return named_error(
        "target", fmt::format("target `{}` needs CPU features this machine lacks ({}; it has {}): its kernels cannot "
                              "run here (`rope-gen build` still compiles for it)",
                              target.to_string(), fmt::join(missing, ", "), host.to_string()));
  return std::nullopt;
}

}  // namespace ropegen::runtime
