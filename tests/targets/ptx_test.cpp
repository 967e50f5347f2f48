// The CUDA kernels' PTX (targets/device_code.h), assembled by the CUDA
// toolkit's ptxas for sm_80 and sm_90: what a driver would load, checked
// without a GPU. Halide 21 targets at most capability 8.6, so sm_90 runs
// the sm_80 (or baseline) PTX, as a driver would JIT it. Skipped, saying
// so, where ptxas is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "ropegen/spec_io.h"
#include "support/run_command.h"
#include "targets/device_code.h"
#include "targets/target_names.h"

namespace ropegen {
namespace {

const std::string kPtxas = ROPEGEN_PTXAS;

struct PtxCase {
  std::string spec, target;
  bool with_k = false, int64_positions = false, pass_through = false, backward = false;
};

std::vector<PtxCase> cases() {
  const std::string llama = "name: l\nhead_dim: 128\ndtype: bf16\nscaling: {type: llama3, factor: 8, original_max_position: 8192}\n";
  const std::string neox = "name: n\nhead_dim: 96\nrotary_dim: 24\ndtype: f16\n";
  const std::string gptj = "name: j\nhead_dim: 256\nrotary_dim: 64\npairing: interleaved\npositions: explicit\n";
  const std::string ds = "name: d\nhead_dim: 192\nrotary_dim: 64\nrotary_offset: 128\npairing: interleaved\n"
                         "output_pairing: half\nlayout: thd\n";
  const std::string xpos = "name: x\nhead_dim: 64\nxpos: {scale_base: 512}\nscaling: {type: dynamic, factor: 2, "
                           "original_max_position: 64}\n";
  const std::string mrope = "name: m\nhead_dim: 128\ndtype: bf16\npositions: explicit\naxes: {sections: [16, 24, 24]}\n";
  const std::string learned_freq = "name: f\nhead_dim: 64\npairing: interleaved\nfrequency: {scheme: runtime}\n";
  const std::string cache = "name: c\nhead_dim: 128\ndtype: bf16\npositions: explicit\nfrequency: {scheme: table}\n";
  const std::string cache_huge = "name: h\nhead_dim: 8192\npairing: interleaved\nfrequency: {scheme: table}\n";
  const std::string sinusoidal = "name: s\nencoding: sinusoidal\ndim: 512\ntable_form: roformer\nlayout: td\n";
  const std::string learned = "name: w\nencoding: learned\ndim: 768\ndtype: f16\n";
  const std::string alibi = "name: a\nencoding: alibi\nnum_heads: 12\nform: causal\ndtype: bf16\n";
  // QK-RMSNorm + RoPE: Qwen3's whole-range bf16, Gemma's 1 + w on a partial interleaved f16 head.
  const std::string qk_norm =
      "name: q\nhead_dim: 128\ndtype: bf16\nqk_norm: {type: rms, eps: 1.0e-6, weight: per_head}\n";
  const std::string qk_norm_partial =
      "name: g\nhead_dim: 256\nrotary_dim: 64\npairing: interleaved\ndtype: f16\n"
      "positions: explicit\nqk_norm: {type: rms_one_plus, eps: 1.0e-6, weight: per_head}\n";
  std::vector<PtxCase> out;
  for (const char* target : {"host-cuda", "host-cuda-cuda_capability_80"}) {
    out.push_back({llama, target, true});
    out.push_back({neox, target, false, false, true});
    out.push_back({gptj, target, true, true});
    out.push_back({ds, target, true});
    out.push_back({xpos, target, true});
    // Backward kernels (DeepSeek-V3's pairings swap), multi-axis, run-time
    // frequencies with their gradient, and the other encodings.
    out.push_back({ds, target, true, false, false, true});
    out.push_back({mrope, target, true, true});
    out.push_back({learned_freq, target, true, false, false, true});
    // cos/sin read from a cache: shared memory per tile, and per thread (huge heads), backward.
    out.push_back({cache, target, true, true});
    out.push_back({cache, target, true, false, false, true});
    out.push_back({cache_huge, target, true});
    out.push_back({qk_norm, target, true});
    out.push_back({qk_norm_partial, target, true, true});
    for (const std::string& other : {sinusoidal, learned, alibi}) out.push_back({other, target});
  }
  return out;
}

TEST(Ptx, AssemblesForSm80AndSm90) {
  if (!std::filesystem::exists(kPtxas)) GTEST_SKIP() << "no CUDA toolkit: " << kPtxas << " does not exist";
  const std::string dir = test::make_temp_dir();
  int assembled = 0;
  for (const PtxCase& c : cases()) {
    SCOPED_TRACE(c.target + "\n" + c.spec);
    const RopeSpec spec = *parse_spec(c.spec, "ptx");
    lowering::KernelVariant variant;
    variant.with_k = c.with_k;
    variant.position_type = c.int64_positions ? IdType::Int64 : IdType::Int32;
    variant.backward = c.backward;
    const Result<std::string> ptx = targets::cuda_ptx(spec, variant, *targets::parse_target(c.target), c.pass_through);
    ASSERT_TRUE(ptx.ok()) << format(ptx.errors());
    const std::string file = dir + "/kernel.ptx";
    test::write_text(file, *ptx);
    for (const char* arch : {"sm_80", "sm_90"}) {
      const test::CommandResult r = test::run_command(fmt::format("{} -arch={} {} -o {}/kernel.cubin", kPtxas, arch, file, dir));
      EXPECT_EQ(r.exit_code, 0) << arch << ": " << r.err;
      assembled += r.exit_code == 0;
    }
  }
  std::filesystem::remove_all(dir);
  std::printf("[ PTX      ] %d kernels assembled by %s\n", assembled, kPtxas.c_str());
}

// The forward q kernel's PTX of a spec, for sm_80.
Result<std::string> forward_ptx(const std::string& spec_text) {
  const RopeSpec spec = *parse_spec(spec_text, "w");
  return targets::cuda_ptx(spec, lowering::KernelVariant{}, *targets::parse_target("host-cuda-cuda_capability_80"));
}

TEST(Ptx, WideLoadsAndStoresOfTheHeadDim) {
  // The half-split f32 kernel moves 16-byte vectors (4 pairs) per access.
  const Result<std::string> ptx = forward_ptx("name: w\nhead_dim: 128\n");
  ASSERT_TRUE(ptx.ok()) << format(ptx.errors());
  EXPECT_NE(ptx->find("ld.global.nc.v4."), std::string::npos) << *ptx;
  EXPECT_NE(ptx->find("st.global.v4."), std::string::npos) << *ptx;
}

// The rotation's multiply-adds are CUDA's own fused operation (lowering/fma.h),
// not the float64 emulation.
TEST(Ptx, RotationUsesTheFusedInstruction) {
  const Result<std::string> ptx = forward_ptx("name: w\nhead_dim: 128\ndtype: bf16\n");
  ASSERT_TRUE(ptx.ok()) << format(ptx.errors());
  EXPECT_NE(ptx->find("fma.rn.f32"), std::string::npos) << *ptx;
  EXPECT_EQ(ptx->find("cvt.f64.f32"), std::string::npos) << *ptx;  // the emulation widens its operands
}

}  // namespace
}  // namespace ropegen
