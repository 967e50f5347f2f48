// The Vulkan kernels, run for real (lavapipe on the CPU in CI): every
// sweep of the CPU test against the reference, and bit for bit against the
// host's kernel (gpu_parity.h). Skipped, visibly, without a Vulkan device.
#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "kernels/encoding_sweeps.h"
#include "kernels/gpu_parity.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_sweeps.h"
#include "runtime/device_call.h"

namespace ropegen {
namespace {

// In two halves by layout, so ctest runs them side by side (lavapipe is slow).
std::vector<test::Case> layouts_sweep(std::initializer_list<const char*> layouts) {
  std::vector<test::Case> out;
  for (const test::Case& c : test::sweep_layouts_pairings_dtypes_scalings())
    for (const char* l : layouts)
      if (c.layout == l) out.push_back(c);
  return out;
}
TEST(VulkanKernel, SweepBshdBhsdPairingsDtypesScalings) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("bshd, bhsd x pairings x dtypes x scalings", layouts_sweep({"bshd", "bhsd"}), *v.target);
}
TEST(VulkanKernel, SweepSbhdThdPairingsDtypesScalings) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("sbhd, thd x pairings x dtypes x scalings", layouts_sweep({"sbhd", "thd"}), *v.target);
}
TEST(VulkanKernel, ExplicitPositionsInt32Int64SharedAndOffsets) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("explicit positions", test::sweep_explicit_positions(), *v.target);
}
TEST(VulkanKernel, InPlaceIsExact) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("in place", test::sweep_in_place(), *v.target);
}
TEST(VulkanKernel, OddSizes) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("odd sizes", test::sweep_odd_sizes(), *v.target);
}
TEST(VulkanKernel, OutputPairingDiffersFromInputPairing) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("output pairing", test::sweep_output_pairing(), *v.target);
}
TEST(VulkanKernel, QkNormThenRope) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("qk_norm", test::sweep_qk_norm(), *v.target);
}
TEST(VulkanKernel, QkNormThenRopeBackward) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("qk_norm backward", test::backward_of(test::sweep_qk_norm()), *v.target);
}
TEST(VulkanKernel, Fp8Outputs) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("fp8 outputs", test::sweep_fp8_output(), *v.target);
}
TEST(VulkanEncodings, SinusoidalAndLearned) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::run_encoding_sweep(test::sweep_sinusoidal_and_learned(), "vulkan", true);
}
TEST(VulkanEncodings, Alibi) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::run_encoding_sweep(test::sweep_alibi(), "vulkan", true);
}
TEST(VulkanEncodings, MultiAxisRope) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::run_encoding_sweep(test::sweep_multi_axis_rope(), "vulkan", true);
}
TEST(VulkanEncodings, BackwardAndRuntimeFrequencies) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::run_encoding_sweep(test::sweep_backward_and_runtime_frequencies(), "vulkan", true);
}
TEST(VulkanEncodings, CosSinCache) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::run_encoding_sweep(test::sweep_cos_sin_cache(), "vulkan", true);
}
TEST(VulkanKernel, XposLongRopeAndSchemes) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("xpos, longrope, schemes", test::sweep_xpos_longrope_schemes(), *v.target);
}
TEST(VulkanKernel, GpuScheduleShapes) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("GPU schedule shapes", test::sweep_gpu_shapes(), *v.target);
}

TEST(VulkanKernelAccuracy, TrigAtLongPositionsSameBitsAsHost) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  using test::TrigPositions;
  for (TrigPositions how : {TrigPositions::Int64Ids, TrigPositions::Int32Ids, TrigPositions::Implicit})
  for (int64_t max_position : {int64_t{1} << 20, int64_t{1} << 24, (int64_t{1} << 31) - 1}) {
    SCOPED_TRACE(static_cast<int>(how));
    std::vector<float> host, vulkan;
    test::max_trig_error(500000.0, max_position, Halide::get_host_target(), &host, how);
    const double err = test::max_trig_error(500000.0, max_position, *v.target, &vulkan, how);
    EXPECT_LT(err, 1e-6);
    ASSERT_EQ(host.size(), vulkan.size());
    int64_t worst = 0;
    for (size_t i = 0; i < host.size(); ++i) worst = std::max(worst, test::ulp_distance(host[i], vulkan[i]));
    std::printf("vulkan cos/sin, positions (kind %d) up to %lld: max error %.3g, max %lld ulp from the host\n",
                static_cast<int>(how), static_cast<long long>(max_position), err, static_cast<long long>(worst));
    EXPECT_EQ(worst, 0);
  }
}

TEST(VulkanKernel, FusedQkvViewsWithoutCopy) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) test::check_fused_qkv(layout, in_place, *v.target);
}

// Device calls: the same cases with their tensors in Vulkan memory (rope-gen's
// DeviceMemory), bit for bit equal to the host kernels, and nothing staged.
class VulkanDeviceMemory : public ::testing::Test {
 protected:
  void SetUp() override { staged_ = runtime::staged_parts(); }
  void TearDown() override {
    if (!IsSkipped()) {
      EXPECT_EQ(runtime::staged_parts(), staged_) << "a device call was staged";
    }
  }
  uint64_t staged_ = 0;
};

TEST_F(VulkanDeviceMemory, InPlaceOutOfPlaceLayoutsAndPositions) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("device memory: in place (bshd, bhsd)", test::sweep_in_place(), *v.target, test::Memory::Device);
  test::expect_parity("device memory: explicit positions (bshd, bhsd, sbhd, thd)", test::sweep_explicit_positions(),
                      *v.target, test::Memory::Device);
}
TEST_F(VulkanDeviceMemory, PartialRotaryOutOfPlaceAndOddSizes) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("device memory: output pairing", test::sweep_output_pairing(), *v.target, test::Memory::Device);
  test::expect_parity("device memory: odd sizes", test::sweep_odd_sizes(), *v.target, test::Memory::Device);
  test::expect_parity("device memory: fp8 outputs", test::sweep_fp8_output(), *v.target, test::Memory::Device);
}
TEST_F(VulkanDeviceMemory, PackedThdAndGpuShapes) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("device memory: GPU schedule shapes (thd with cu_seqlens)", test::sweep_gpu_shapes(), *v.target,
                      test::Memory::Device);
  test::expect_parity("device memory: qk_norm", test::sweep_qk_norm(), *v.target, test::Memory::Device);
}
TEST_F(VulkanDeviceMemory, Backward) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  test::expect_parity("device memory: backward", test::backward_of(test::sweep_output_pairing()), *v.target,
                      test::Memory::Device);
  test::expect_parity("device memory: backward, GPU shapes", test::backward_of(test::sweep_gpu_shapes()), *v.target,
                      test::Memory::Device);
}
TEST_F(VulkanDeviceMemory, FusedQkvViewsOfOneAllocation) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) test::check_fused_qkv(layout, in_place, *v.target, test::Memory::Device);
}

// The counter the fixture reads does count: host memory on a GPU target is staged.
TEST(VulkanKernel, HostMemoryIsStaged) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  const uint64_t before = runtime::staged_parts();
  test::run_case(test::Case{}, *v.target);
  EXPECT_EQ(runtime::staged_parts(), before + 1);
}

}  // namespace
}  // namespace ropegen
