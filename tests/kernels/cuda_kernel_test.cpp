// The CUDA kernels on a CUDA device, against the reference and bit for bit
// against the host (gpu_parity.h). Without a device (CI has none) every
// test is skipped with the reason, never passed silently; the PTX is still
// checked by ptxas (tests/targets/ptx_test.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/gpu_parity.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_sweeps.h"

namespace ropegen {
namespace {

#define REQUIRE_CUDA(t)                                  \
  const test::GpuTarget t = test::gpu_target("cuda");   \
  if (!t.target) GTEST_SKIP() << "no CUDA device: " << t.why_not

void expect_parity(const char* what, const std::vector<test::Case>& cases, const Halide::Target& cuda) {
  const test::Parity p = test::run_parity(what, cases, cuda);
  EXPECT_EQ(p.max_ulp, 0) << p.differing << " elements differ from the host's kernel, worst in " << p.worst_case;
}

TEST(CudaKernel, SweepLayoutsPairingsDtypesScalings) {
  REQUIRE_CUDA(c);
  expect_parity("layouts x pairings x dtypes x scalings", test::sweep_layouts_pairings_dtypes_scalings(), *c.target);
}
TEST(CudaKernel, ExplicitPositionsInPlaceOddSizes) {
  REQUIRE_CUDA(c);
  expect_parity("explicit positions", test::sweep_explicit_positions(), *c.target);
  expect_parity("in place", test::sweep_in_place(), *c.target);
  expect_parity("odd sizes", test::sweep_odd_sizes(), *c.target);
}
TEST(CudaKernel, OutputPairingXposSchemesAndShapes) {
  REQUIRE_CUDA(c);
  expect_parity("output pairing", test::sweep_output_pairing(), *c.target);
  expect_parity("xpos, longrope, schemes", test::sweep_xpos_longrope_schemes(), *c.target);
  expect_parity("GPU schedule shapes", test::sweep_gpu_shapes(), *c.target);
}

TEST(CudaKernelAccuracy, TrigAtLongPositionsSameBitsAsHost) {
  REQUIRE_CUDA(c);
  std::vector<float> host, cuda;
  test::max_trig_error(500000.0, int64_t{1} << 24, Halide::get_host_target(), &host);
  EXPECT_LT(test::max_trig_error(500000.0, int64_t{1} << 24, *c.target, &cuda), 1e-6);
  ASSERT_EQ(host.size(), cuda.size());
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(test::ulp_distance(host[i], cuda[i]), 0) << "at " << i;
}

TEST(CudaKernel, FusedQkvViewsWithoutCopy) {
  REQUIRE_CUDA(c);
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) test::check_fused_qkv(layout, in_place, *c.target);
}

}  // namespace
}  // namespace ropegen
