// The CPU kernels (JIT) against the independent float64 reference over the
// sweeps of the spec space (kernel_sweeps.h). Each case prints its
// parameters, so a failure names the exact combination.
#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/encoding_sweeps.h"
#include "kernels/kernel_case.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_sweeps.h"

namespace ropegen {
namespace {

using test::Case;

void run_all(const std::vector<Case>& cases) {
  for (const Case& c : cases) test::run_case(c, Halide::get_host_target());
}

TEST(CpuKernel, SingleCaseSmoke) { run_all({Case{}}); }
TEST(CpuKernel, SweepLayoutsPairingsDtypesScalings) { run_all(test::sweep_layouts_pairings_dtypes_scalings()); }
TEST(CpuKernel, ExplicitPositionsInt32Int64SharedAndOffsets) { run_all(test::sweep_explicit_positions()); }
TEST(CpuKernel, InPlaceIsExact) { run_all(test::sweep_in_place()); }
TEST(CpuKernel, OddSizes) { run_all(test::sweep_odd_sizes()); }
TEST(CpuKernel, OutputPairingDiffersFromInputPairing) { run_all(test::sweep_output_pairing()); }
TEST(CpuKernel, XposLongRopeAndSchemes) { run_all(test::sweep_xpos_longrope_schemes()); }

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
