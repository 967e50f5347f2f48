// The Vulkan kernels, run for real (lavapipe on the CPU in CI): every
// sweep of the CPU test against the reference, and bit for bit against the
// host's kernel (gpu_parity.h). Skipped, visibly, without a Vulkan device.
#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "kernels/gpu_parity.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_sweeps.h"

namespace ropegen {
namespace {

#define REQUIRE_VULKAN(t)                                          \
  const test::GpuTarget t = test::gpu_target("vulkan");           \
  if (!t.target) GTEST_SKIP() << "no Vulkan device: " << t.why_not

void expect_parity(const char* what, const std::vector<test::Case>& cases, const Halide::Target& vulkan) {
  const test::Parity p = test::run_parity(what, cases, vulkan);
  EXPECT_EQ(p.max_ulp, 0) << p.differing << " elements differ from the host's kernel, worst in " << p.worst_case;
}

// In two halves by layout, so ctest runs them side by side (lavapipe is slow).
std::vector<test::Case> layouts_sweep(std::initializer_list<const char*> layouts) {
  std::vector<test::Case> out;
  for (const test::Case& c : test::sweep_layouts_pairings_dtypes_scalings())
    for (const char* l : layouts)
      if (c.layout == l) out.push_back(c);
  return out;
}
TEST(VulkanKernel, SweepBshdBhsdPairingsDtypesScalings) {
  REQUIRE_VULKAN(v);
  expect_parity("bshd, bhsd x pairings x dtypes x scalings", layouts_sweep({"bshd", "bhsd"}), *v.target);
}
TEST(VulkanKernel, SweepSbhdThdPairingsDtypesScalings) {
  REQUIRE_VULKAN(v);
  expect_parity("sbhd, thd x pairings x dtypes x scalings", layouts_sweep({"sbhd", "thd"}), *v.target);
}
TEST(VulkanKernel, ExplicitPositionsInt32Int64SharedAndOffsets) {
  REQUIRE_VULKAN(v);
  expect_parity("explicit positions", test::sweep_explicit_positions(), *v.target);
}
TEST(VulkanKernel, InPlaceIsExact) {
  REQUIRE_VULKAN(v);
  expect_parity("in place", test::sweep_in_place(), *v.target);
}
TEST(VulkanKernel, OddSizes) {
  REQUIRE_VULKAN(v);
  expect_parity("odd sizes", test::sweep_odd_sizes(), *v.target);
}
TEST(VulkanKernel, OutputPairingDiffersFromInputPairing) {
  REQUIRE_VULKAN(v);
  expect_parity("output pairing", test::sweep_output_pairing(), *v.target);
}
TEST(VulkanKernel, XposLongRopeAndSchemes) {
  REQUIRE_VULKAN(v);
  expect_parity("xpos, longrope, schemes", test::sweep_xpos_longrope_schemes(), *v.target);
}
TEST(VulkanKernel, GpuScheduleShapes) {
  REQUIRE_VULKAN(v);
  expect_parity("GPU schedule shapes", test::sweep_gpu_shapes(), *v.target);
}

TEST(VulkanKernelAccuracy, TrigAtLongPositionsSameBitsAsHost) {
  REQUIRE_VULKAN(v);
  for (int64_t max_position : {int64_t{1} << 20, int64_t{1} << 24}) {
    std::vector<float> host, vulkan;
    test::max_trig_error(500000.0, max_position, Halide::get_host_target(), &host);
    const double err = test::max_trig_error(500000.0, max_position, *v.target, &vulkan);
    EXPECT_LT(err, 1e-6);
    ASSERT_EQ(host.size(), vulkan.size());
    int64_t worst = 0;
    for (size_t i = 0; i < host.size(); ++i) worst = std::max(worst, test::ulp_distance(host[i], vulkan[i]));
    std::printf("vulkan cos/sin, positions up to %lld: max error %.3g, max %lld ulp from the host\n",
                static_cast<long long>(max_position), err, static_cast<long long>(worst));
    EXPECT_EQ(worst, 0);
  }
}

TEST(VulkanKernel, FusedQkvViewsWithoutCopy) {
  REQUIRE_VULKAN(v);
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) test::check_fused_qkv(layout, in_place, *v.target);
}

}  // namespace
}  // namespace ropegen
