// The CUDA kernels on a CUDA device, against the reference and bit for bit
// against the host (gpu_parity.h). Without a device (CI has none) every
// test is skipped with the reason, never passed silently; the PTX is still
// checked by ptxas (tests/targets/ptx_test.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/encoding_sweeps.h"
#include "kernels/gpu_parity.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_sweeps.h"
#include "runtime/device_call.h"

namespace ropegen {
namespace {

TEST(CudaEncodings, EveryEncodingAndBackward) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  for (const auto& sweep : {test::sweep_sinusoidal_and_learned(), test::sweep_alibi(), test::sweep_multi_axis_rope(),
                            test::sweep_backward_and_runtime_frequencies(), test::sweep_cos_sin_cache()})
    test::run_encoding_sweep(sweep, "cuda", true);
}
TEST(CudaKernel, SweepLayoutsPairingsDtypesScalings) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  test::expect_parity("layouts x pairings x dtypes x scalings", test::sweep_layouts_pairings_dtypes_scalings(), *c.target);
}
TEST(CudaKernel, ExplicitPositionsInPlaceOddSizes) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  test::expect_parity("explicit positions", test::sweep_explicit_positions(), *c.target);
  test::expect_parity("in place", test::sweep_in_place(), *c.target);
  test::expect_parity("odd sizes", test::sweep_odd_sizes(), *c.target);
}
TEST(CudaKernel, OutputPairingXposSchemesAndShapes) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  test::expect_parity("output pairing", test::sweep_output_pairing(), *c.target);
  test::expect_parity("xpos, longrope, schemes", test::sweep_xpos_longrope_schemes(), *c.target);
  test::expect_parity("GPU schedule shapes", test::sweep_gpu_shapes(), *c.target);
}
TEST(CudaKernel, QkNormThenRopeAndItsBackward) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  test::expect_parity("qk_norm", test::sweep_qk_norm(), *c.target);
  test::expect_parity("qk_norm backward", test::backward_of(test::sweep_qk_norm()), *c.target);
}
TEST(CudaKernel, Fp8Outputs) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  test::expect_parity("fp8 outputs", test::sweep_fp8_output(), *c.target);
}

TEST(CudaKernelAccuracy, TrigAtLongPositionsSameBitsAsHost) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  using test::TrigPositions;
  for (TrigPositions how : {TrigPositions::Int64Ids, TrigPositions::Int32Ids, TrigPositions::Implicit}) {
    SCOPED_TRACE(static_cast<int>(how));
    std::vector<float> host, cuda;
    test::max_trig_error(500000.0, int64_t{1} << 24, Halide::get_host_target(), &host, how);
    EXPECT_LT(test::max_trig_error(500000.0, int64_t{1} << 24, *c.target, &cuda, how), 1e-6);
    ASSERT_EQ(host.size(), cuda.size());
    for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(test::ulp_distance(host[i], cuda[i]), 0) << "at " << i;
  }
}

TEST(CudaKernel, FusedQkvViewsWithoutCopy) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) test::check_fused_qkv(layout, in_place, *c.target);
}

// Device calls: the cases' tensors in CUDA memory (cuMemAlloc), run in the
// primary context on the legacy default stream, nothing staged.
TEST(CudaDeviceMemory, SameBitsAsTheHostNothingStaged) {
  ROPEGEN_REQUIRE_GPU(c, "cuda");
  const uint64_t staged = runtime::staged_parts();
  test::expect_parity("device memory: in place", test::sweep_in_place(), *c.target, test::Memory::Device);
  test::expect_parity("device memory: explicit positions", test::sweep_explicit_positions(), *c.target,
                      test::Memory::Device);
  test::expect_parity("device memory: output pairing", test::sweep_output_pairing(), *c.target, test::Memory::Device);
  test::expect_parity("device memory: odd sizes", test::sweep_odd_sizes(), *c.target, test::Memory::Device);
  test::expect_parity("device memory: GPU schedule shapes", test::sweep_gpu_shapes(), *c.target, test::Memory::Device);
  test::expect_parity("device memory: backward", test::backward_of(test::sweep_gpu_shapes()), *c.target,
                      test::Memory::Device);
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) test::check_fused_qkv(layout, in_place, *c.target, test::Memory::Device);
  EXPECT_EQ(runtime::staged_parts(), staged) << "a device call was staged";
}

}  // namespace
}  // namespace ropegen
