// The host side of the GPU pipelines (targets/gpu_schedule.cpp), read from
// Halide's lowered statement for CUDA and Vulkan: kernel launches and no
// loop, no copy to the host — so the tensors of a call may live on the
// device alone. dL/d(inv_freq) of run-time frequencies is reduced on the
// device and the frequencies' fixed-point split computed there; only the
// dynamic NTK frequencies (a float64 pow of the call's seq_len, reading no
// tensor) are computed on the host, which shows that the check sees a
// host loop when there is one.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "ropegen/spec_io.h"
#include "targets/device_code.h"
#include "targets/target_names.h"

namespace ropegen {
namespace {

struct HostCode {
  int loops = 0;
  bool copies_to_host = false;
  std::string stmt;
};

HostCode host_code(const std::string& spec_text, const lowering::KernelVariant& variant, const std::string& target) {
  const RopeSpec spec = parse_spec(spec_text, "gpu.yaml").value();
  const Result<std::string> stmt =
      targets::pipeline_code(spec, variant, targets::parse_target(target).value(), targets::PipelineCode::LoweredStmt);
  EXPECT_TRUE(stmt.ok()) << (stmt.ok() ? "" : stmt.errors().front().message);
  HostCode h;
  if (!stmt.ok()) return h;
  // Funcs built again in one process get suffixes ($1, ...): dropped.
  h.stmt = std::regex_replace(*stmt, std::regex("\\$[0-9]+"), "");
  const std::regex loop("\\bfor \\(");
  h.loops = static_cast<int>(std::distance(std::sregex_iterator(h.stmt.begin(), h.stmt.end(), loop), std::sregex_iterator()));
  h.copies_to_host = h.stmt.find("halide_copy_to_host") != std::string::npos;
  return h;
}

lowering::KernelVariant with_k(bool backward) {
  lowering::KernelVariant v;
  v.with_k = true;
  v.backward = backward;
  return v;
}

TEST(GpuHostCode, RuntimeFrequencyGradientRunsOnTheDevice) {
  const std::string spec = "name: g\nhead_dim: 128\ndtype: bf16\nfrequency: {scheme: runtime}\nxpos: {scale_base: 512}\n";
  for (const char* target : {"cuda", "vulkan"}) {
    SCOPED_TRACE(target);
    const HostCode h = host_code(spec, with_k(true), target);
    EXPECT_EQ(h.loops, 0) << h.stmt;
    EXPECT_FALSE(h.copies_to_host) << h.stmt;
    // Launches of every level and of d_freqs itself (kernel names spell d_freqs$1 as d_freqs__1).
    for (const char* kernel : {"_level0", "_level1", "_level2", "(__[0-9]+)?_s0"})
      EXPECT_TRUE(std::regex_search(h.stmt, std::regex(std::string("_run\\([^\"]*\"_kernel_d_freqs") + kernel)))
          << "d_freqs" << kernel << " is not launched";
  }
}

TEST(GpuHostCode, ForwardKernelsOnlyLaunch) {
  for (const std::string spec : {"name: l\nhead_dim: 128\ndtype: bf16\nscaling: {type: llama3, factor: 8, original_max_position: 8192}\n",
                                 "name: t\nhead_dim: 128\npositions: explicit\nfrequency: {scheme: table}\n",
                                 "name: k\nhead_dim: 128\nlayout: thd\npositions: explicit\n"
                                 "kv_cache: {layout: paged_nhd, page_size: 16}\n"})
    for (const char* target : {"cuda", "vulkan"}) {
      SCOPED_TRACE(std::string(target) + "\n" + spec);
      lowering::KernelVariant variant = with_k(false);
      variant.with_v = spec.find("kv_cache") != std::string::npos;
      const HostCode h = host_code(spec, variant, target);
      EXPECT_EQ(h.loops, 0) << h.stmt;
      EXPECT_FALSE(h.copies_to_host) << h.stmt;
    }
}

// Halide 21's Vulkan backend packs a kernel's scalar arguments tightly but
// reads each as at least 4 bytes: a bool or 16-bit argument (say, a
// comparison of seq_len that Halide lifts out of the kernel) is read with
// the bytes after it, whatever they hold. LongRoPE's per-call choice was
// one (lavapipe picked the long factors under ASan, whose malloc fills
// memory). Every scalar argument of every launch must be 4 bytes or more.
TEST(GpuHostCode, NoKernelTakesAScalarNarrowerThanFourBytes) {
  const std::regex launch("_run\\([^,]+, \"(\\w+)\"[^;]*?make_struct\\(((?:\\(int64\\)[0-9]+, )*)\\(int64\\)0\\)");
  const std::regex size("\\(int64\\)([0-9]+)");
  for (const std::string spec :
       {"name: l\nhead_dim: 8\nscaling: {type: longrope, factor: 16, original_max_position: 100, short_factor: [1, 2, 3, 4], "
        "long_factor: [5, 6, 7, 8]}\n",
        "name: x\nhead_dim: 64\ndtype: bf16\nxpos: {scale_base: 512}\nscaling: {type: yarn, factor: 4, original_max_position: 64}\n",
        "name: d\nhead_dim: 64\nlayout: thd\nscaling: {type: dynamic, factor: 2, original_max_position: 64}\n",
        "name: k\nhead_dim: 64\nlayout: thd\npositions: explicit\nkv_cache: {layout: paged_nhd, page_size: 16, dtype: fp8_e4m3}\n"})
    for (const char* target : {"cuda", "vulkan"})
      for (bool backward : {false, true}) {
        SCOPED_TRACE(std::string(target) + (backward ? " backward\n" : "\n") + spec);
        if (backward && spec.find("kv_cache") != std::string::npos) continue;
        lowering::KernelVariant variant = with_k(backward);
        variant.with_v = spec.find("kv_cache") != std::string::npos;
        const HostCode h = host_code(spec, variant, target);
        int launches = 0;
        for (auto l = std::sregex_iterator(h.stmt.begin(), h.stmt.end(), launch); l != std::sregex_iterator(); ++l, ++launches) {
          const std::string sizes = (*l)[2];
          for (auto s = std::sregex_iterator(sizes.begin(), sizes.end(), size); s != std::sregex_iterator(); ++s)
            EXPECT_GE(std::stoi((*s)[1]), 4) << (*l)[1] << " takes a " << (*s)[1] << "-byte argument:\n" << (*l)[0];
        }
        EXPECT_GT(launches, 0) << h.stmt;
      }
}

TEST(GpuHostCode, DynamicNtkFrequenciesAreTheHostsOnlyLoops) {
  const std::string spec = "name: d\nhead_dim: 128\nscaling: {type: dynamic, factor: 2, original_max_position: 64}\n";
  for (const char* target : {"cuda", "vulkan"}) {
    SCOPED_TRACE(target);
    const HostCode h = host_code(spec, with_k(false), target);
    EXPECT_EQ(h.loops, 2) << h.stmt;  // inv_freq and its fixed-point split, over the pairs
    EXPECT_NE(h.stmt.find("for (inv_freq.s0.r"), std::string::npos) << h.stmt;
  }
}

}  // namespace
}  // namespace ropegen
