// floor and round-to-nearest-even of float64 from the IEEE bits
// (lowering/exact_f64.h), bit for bit against the C library's floor and
// nearbyint on the CPU and on Vulkan: ties, signed zeros, every exponent
// from subnormals to 2^1023 (integers from 2^52 up), infinities. Halide's
// own round fails this on lavapipe on CPUs without AVX-512 (round(3.5) = 3,
// round(16777217.3) = 16777217.3), which the frequency split relies on.
#include "lowering/exact_f64.h"

#include <Halide.h>
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/gpu_parity.h"
#include "support/run_elementwise.h"

namespace ropegen {
namespace {

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}

std::vector<double> inputs() {
  std::vector<double> v = {0.0,
                           -0.0,
                           0.4,
                           -0.4,
                           0.5,
                           -0.5,
                           1.5,
                           2.5,
                           3.5,
                           -2.5,
                           -3.5,
                           1.0,
                           -1.0,
                           1.6,
                           16777217.3,
                           1e9 + 0.7,
                           683565275.576,
                           4503599627370495.5,
                           4503599627370496.0,
                           9007199254740993.0,
                           3e17,
                           1.5e21,
                           1e300,
                           -1e300,
                           std::numeric_limits<double>::denorm_min(),
                           -std::numeric_limits<double>::min(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  std::mt19937_64 random(5);
  for (int i = 0; i < 20000; ++i) {
    // Any exponent around the fraction's range, and exact halves.
    const double m = std::ldexp(static_cast<double>(random() >> 11), -53);  // [0, 1)
    const int e = static_cast<int>(random() % 80) - 10;
    const double x = std::ldexp(1.0 + m, e) * (random() & 1 ? -1.0 : 1.0);
    v.push_back(x);
    v.push_back(std::floor(x) + 0.5);
  }
  v.resize(v.size() / 64 * 64 + 64, 0.25);  // whole GPU tiles and 256-byte buffers (run_elementwise)
  return v;
}

void expect_exact(const Halide::Target& target) {
  SCOPED_TRACE(target.to_string());
  const std::vector<double> in = inputs();
  Halide::Buffer<double> buffer(static_cast<int>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) buffer(static_cast<int>(i)) = in[i];
  buffer.set_host_dirty();
  Halide::Var x("x");
  const int n = static_cast<int>(in.size());
  std::vector<double> floors, rounds;
  try {
    floors = test::run_elementwise<double>(lowering::floor_f64(buffer(x)), x, n, target);
    rounds = test::run_elementwise<double>(lowering::round_even_f64(buffer(x)), x, n, target);
  } catch (const Halide::Error& e) {
    FAIL() << e.what();
  }
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  int wrong = 0;
  for (size_t i = 0; i < floors.size(); ++i) {
    const double want_floor = std::floor(in[i]), want_round = std::nearbyint(in[i]);
    if (bits(floors[i]) != bits(want_floor) && ++wrong <= 5)
      ADD_FAILURE() << std::hexfloat << "floor(" << in[i] << ") = " << floors[i] << ", want " << want_floor;
    if (bits(rounds[i]) != bits(want_round) && ++wrong <= 5)
      ADD_FAILURE() << std::hexfloat << "round(" << in[i] << ") = " << rounds[i] << ", want " << want_round;
  }
  EXPECT_EQ(wrong, 0) << "of " << floors.size();
}

TEST(ExactF64, FloorAndRoundOnTheCpu) {
  const Halide::Target host = Halide::get_host_target();
  expect_exact(host);
  expect_exact(Halide::Target(host.os, host.arch, host.bits));  // no features
}

TEST(ExactF64, FloorAndRoundOnVulkan) {
  ROPEGEN_REQUIRE_GPU(vulkan, "vulkan");
  expect_exact(*vulkan.target);
}

}  // namespace
}  // namespace ropegen
