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
