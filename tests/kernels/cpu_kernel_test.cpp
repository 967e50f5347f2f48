// The CPU kernels (JIT) against the independent float64 reference over the
// sweeps of the spec space (kernel_sweeps.h). Each case prints its
// parameters, so a failure names the exact combination.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "kernels/encoding_sweeps.h"
#include "kernels/kernel_case.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_sweeps.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "support/sweep_subset.h"

namespace ropegen {
namespace {

using test::Case;

void run_all(const std::vector<Case>& cases) {
  for (const Case& c : test::sweep_subset(cases)) test::run_case(c, Halide::get_host_target());
}

TEST(CpuKernel, SingleCaseSmoke) { run_all({Case{}}); }
TEST(CpuKernel, SweepLayoutsPairingsDtypesScalings) { run_all(test::sweep_layouts_pairings_dtypes_scalings()); }
TEST(CpuKernel, ExplicitPositionsInt32Int64SharedAndOffsets) { run_all(test::sweep_explicit_positions()); }
TEST(CpuKernel, InPlaceIsExact) { run_all(test::sweep_in_place()); }
TEST(CpuKernel, OddSizes) { run_all(test::sweep_odd_sizes()); }
TEST(CpuKernel, OutputPairingDiffersFromInputPairing) { run_all(test::sweep_output_pairing()); }
TEST(CpuKernel, XposLongRopeAndSchemes) { run_all(test::sweep_xpos_longrope_schemes()); }
TEST(CpuKernel, QkNormThenRope) { run_all(test::sweep_qk_norm()); }
TEST(CpuKernel, QkNormThenRopeBackward) { run_all(test::backward_of(test::sweep_qk_norm())); }
TEST(CpuKernel, Fp8Outputs) { run_all(test::sweep_fp8_output()); }

// Float32 weights of bf16 rows are read as they are: the same draws rounded
// to bf16 first give other results (both within the dtype's tolerance of
// their own reference, which run_case checks).
TEST(CpuKernel, QkNormFloat32WeightsAreNotRounded) {
  Case c;
  c.dtype = "bf16", c.head_dim = c.rotary_dim = 64, c.B = 1, c.S = 8, c.H = 4, c.Hk = 2;
  c.qk_norm = "qk_norm: {type: rms, eps: 1.0e-6, weight: per_head}\n";
  c.float32_norm_weights = true;
  const test::CaseOutputs f32 = test::run_case(c, Halide::get_host_target());
  c.float32_norm_weights = false;
  const test::CaseOutputs rounded = test::run_case(c, Halide::get_host_target());
  ASSERT_TRUE(f32.q.defined() && rounded.q.defined());
  int64_t differ = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(f32.q.number_of_elements()); ++i)
    differ += test::ulp_distance(DType::BF16, f32.q, rounded.q, i) != 0;
  EXPECT_GT(differ, 0);
}

TEST(CpuKernelAccuracy, TrigErrorAtLongPositions) {
  using test::TrigPositions;
  const char* names[] = {"int64 ids", "int32 ids", "implicit"};
  for (TrigPositions how : {TrigPositions::Int64Ids, TrigPositions::Int32Ids, TrigPositions::Implicit})
    for (int64_t max_position : {int64_t{1} << 20, int64_t{1} << 24, (int64_t{1} << 31) - 1, int64_t{1} << 32}) {
      if (how == TrigPositions::Int32Ids && max_position > INT32_MAX) continue;
      for (double theta : {10000.0, 500000.0}) {
        const double err = test::max_trig_error(theta, max_position, Halide::get_host_target(), nullptr, how);
        std::printf("kernel cos/sin max error, %s, positions up to %lld, theta %g: %.3g\n", names[static_cast<int>(how)],
                    static_cast<long long>(max_position), theta, err);
        EXPECT_LT(err, 1e-6);  // float32 rounding of the result is 6e-8
      }
    }
}

// Sinusoidal PE by angle addition from 16-position blocks (lowering/additive_algorithm.cpp).
TEST(CpuKernelAccuracy, SinusoidalErrorAtLongPositions) {
  using test::TrigPositions;
  const char* names[] = {"int64 ids", "int32 ids", "implicit"};
  for (TrigPositions how : {TrigPositions::Int64Ids, TrigPositions::Int32Ids, TrigPositions::Implicit})
    for (int64_t max_position : {int64_t{1} << 12, int64_t{1} << 20, int64_t{1} << 24, (int64_t{1} << 31) - 1}) {
      const double err = test::max_sinusoidal_error(max_position, Halide::get_host_target(), how);
      std::printf("sinusoidal PE max error, %s, positions up to %lld: %.3g\n", names[static_cast<int>(how)],
                  static_cast<long long>(max_position), err);
      EXPECT_LT(err, 1e-6);
    }
}

TEST(CpuKernel, FusedQkvViewsWithoutCopy) {
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) test::check_fused_qkv(layout, in_place, Halide::get_host_target());
}

TEST(CpuEncodings, SinusoidalAndLearned) { test::run_encoding_sweep(test::sweep_sinusoidal_and_learned(), "host", false); }
// Sinusoidal PE with implicit positions: a call of several sequences
// reads each token's PE row from a stage computed once for the batch, one
// sequence computes PE where it adds it (lowering's pe_rows): each
// sequence of a batch gets the bits it gets alone, across 16-position
// blocks and tiles, odd dims, bsd and sbd.
TEST(CpuEncodings, SinusoidalRowsSharedByTheBatchAreEachSequencesOwn) {
  const int64_t batch = 3, seq = 37, offset = 65533;
  for (const char* layout : {"bsd", "sbd"})
    for (int64_t dim : {9, 130}) {
      SCOPED_TRACE(fmt::format("{} dim {}", layout, dim));
      const RopeSpec spec =
          parse_spec(fmt::format("name: s\nencoding: sinusoidal\ndim: {}\nlayout: {}\n", dim, layout), "s.yaml").value();
      const bool sbd = std::string(layout) == "sbd";
      std::vector<float> x(batch * seq * dim), out(x.size(), -1.0f);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) / 13.0f - 3.0f;
      auto at = [&](int64_t b, int64_t t) { return (sbd ? t * batch + b : b * seq + t) * dim; };
      auto run = [&](float* in, float* result, int64_t sequences) {
        const std::vector<int64_t> shape = sbd ? std::vector<int64_t>{seq, sequences, dim} : std::vector<int64_t>{sequences, seq, dim};
        Call call;
        call.q = Tensor::dense(in, ElementType::Float32, shape.data(), 3);
        call.out_q = Tensor::dense(result, ElementType::Float32, shape.data(), 3);
        call.offset = offset;
        const Status ran = Runtime::process().run(spec, call);
        ASSERT_TRUE(ran.ok()) << format(ran.errors());
      };
      run(x.data(), out.data(), batch);
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<float> one(seq * dim), alone(one.size(), -2.0f);
        for (int64_t t = 0; t < seq; ++t) std::copy_n(&x[at(b, t)], dim, &one[t * dim]);
        run(one.data(), alone.data(), 1);
        int differ = 0;
        for (int64_t t = 0; t < seq; ++t)
          for (int64_t d = 0; d < dim; ++d) differ += std::memcmp(&out[at(b, t) + d], &alone[t * dim + d], 4) != 0;
        EXPECT_EQ(differ, 0) << "sequence " << b;
      }
    }
}

TEST(CpuEncodings, Alibi) { test::run_encoding_sweep(test::sweep_alibi(), "host", false); }
TEST(CpuEncodings, MultiAxisRope) { test::run_encoding_sweep(test::sweep_multi_axis_rope(), "host", false); }
TEST(CpuEncodings, BackwardAndRuntimeFrequencies) {
  test::run_encoding_sweep(test::sweep_backward_and_runtime_frequencies(), "host", false);
}
TEST(CpuEncodings, CosSinCache) { test::run_encoding_sweep(test::sweep_cos_sin_cache(), "host", false); }
TEST(CpuEncodings, BackwardIsTheAdjointOfForward) {
  for (const char* spec : {"name: a\nhead_dim: 16\n", "name: a\nhead_dim: 24\nrotary_dim: 16\npairing: interleaved\n",
                           "name: a\nhead_dim: 16\npairing: interleaved\noutput_pairing: half\n",
                           "name: a\nhead_dim: 16\nxpos: {scale_base: 16}\n",
                           "name: a\nhead_dim: 16\nscaling: {type: yarn, factor: 8, original_max_position: 4}\n"})
    EXPECT_LT(test::adjoint_error(spec, "host"), 1e-6) << spec;
}

}  // namespace
}  // namespace ropegen
