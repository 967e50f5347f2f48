// The rotation's fused multiply-add, bit for bit against the C library's
// fmaf (correctly rounded, IEEE 754) on every CPU path (the instruction,
// the float64 emulation) and on Vulkan (the emulation): random words of
// every class, special values, underflow, cancellation, and products that
// are float32 rounding ties nudged by addends far below them (where a
// plain float64 sum, rounded twice, is wrong).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <Halide.h>

#include "kernels/gpu_parity.h"
#include "lowering/fma.h"
#include "support/run_elementwise.h"
#include "support/float_bits.h"

namespace ropegen {
namespace {

using Triple = std::array<float, 3>;

using test::bits_of;
using test::float_from_bits;

std::vector<Triple> inputs() {
  std::vector<Triple> t;
  std::mt19937 random(11);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
  auto sign = [&] { return uniform(0, 1) ? 1.0f : -1.0f; };
  // Every class of value, each with each.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {0.0f, 1.0f, inf, std::numeric_limits<float>::quiet_NaN(),
                                      std::numeric_limits<float>::denorm_min(), float_from_bits(0x007fffffu),
                                      std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                                      1.0f + 0x1p-23f, 0x1p-75f};
  for (float a : special)
    for (float b : special)
      for (float c : special)
        for (int s = 0; s < 8; ++s)
          t.push_back({s & 1 ? -a : a, s & 2 ? -b : b, s & 4 ? -c : c});
  // Random words: every class, any exponents.
  for (int i = 0; i < 100000; ++i)
    t.push_back({float_from_bits(random()), float_from_bits(random()), float_from_bits(random())});
  // Products that are exact float32 ties (an odd 24-bit mantissa times 3, 5,
  // 7: 25 significant bits, odd), plus an addend 1 to 60 bits below their
  // last bit, either sign, or none: the exact sum is just off the tie.
  for (int i = 0; i < 100000; ++i) {
    const int mantissa = (1 << 23) | (uniform(0, (1 << 22) - 1) << 1) | 1;
    const int scale = uniform(-40, 40);
    const float a = sign() * std::ldexp(static_cast<float>(mantissa), scale - 23);
    const float b = sign() * static_cast<float>(2 * uniform(1, 3) + 1);
    const int below = uniform(1, 60);
    const float c = i % 8 == 0 ? 0.0f : sign() * std::ldexp(1.0f + uniform(0, 255) * 0x1p-8f, scale - 23 - below);
    t.push_back({a, b, c});
  }
  // Cancellation: c near -(a b); bf16-like a (8-bit mantissas, as RoPE's
  // inputs); products and sums in the subnormal range.
  for (int i = 0; i < 100000; ++i) {
    const float a = std::ldexp(static_cast<float>(uniform(1, 1 << 24)), uniform(-30, 10));
    const float b = sign() * std::ldexp(static_cast<float>(uniform(1, 1 << 24)), uniform(-30, 0));
    switch (i % 3) {
      case 0: t.push_back({a, b, -a * b * (1.0f + uniform(-4, 4) * 0x1p-23f)}); break;
      case 1: t.push_back({float_from_bits(bits_of(a) & 0xffff0000u), b, sign() * a * std::ldexp(1.0f, uniform(-40, 0))}); break;
      default:
        t.push_back({std::ldexp(a, -100), std::ldexp(b, -40), sign() * std::ldexp(float_from_bits(random() & 0x00ffffffu), uniform(-10, 20))});
    }
  }
  return t;
}

std::vector<float> run(const std::vector<Triple>& triples, const Halide::Target& target) {
  const int n = static_cast<int>(triples.size());
  Halide::Buffer<float> in(n, 3);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 3; ++j) in(i, j) = triples[i][j];
  in.set_host_dirty();
  Halide::Var x("x");
  return test::run_elementwise<float>(lowering::fused_multiply_add(in(x, 0), in(x, 1), in(x, 2)), x, n, target);
}

void expect_correctly_rounded(const std::string& what, const Halide::Target& target) {
  SCOPED_TRACE(what + ": " + target.to_string());
  const std::vector<Triple> triples = inputs();
  std::vector<float> got;
  try {
    got = run(triples, target);
  } catch (const Halide::Error& e) {
    FAIL() << e.what();
  }
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& [a, b, c] = triples[i];
    const float want = std::fma(a, b, c);
    const bool same = std::isnan(want) ? std::isnan(got[i]) : bits_of(got[i]) == bits_of(want);
    if (!same && ++wrong <= 5)
      ADD_FAILURE() << "at " << i << std::hexfloat << ": fma(" << a << ", " << b << ", " << c << ") got " << got[i]
                    << ", want " << want;
  }
  EXPECT_EQ(wrong, 0) << "of " << got.size();
}

TEST(FusedMultiplyAdd, CorrectlyRoundedOnEveryCpuPath) {
  const Halide::Target host = Halide::get_host_target();
  if (host.arch == Halide::Target::X86 && !host.has_feature(Halide::Target::FMA))
    std::printf("[  NOTE    ] no FMA here: the instruction path is not run\n");
  else
    expect_correctly_rounded("the instruction", host);
  // Without features (x86-64: SSE2; arm-32): the float64 emulation.
  expect_correctly_rounded("the emulation", Halide::Target(host.os, host.arch, host.bits));
}

TEST(FusedMultiplyAdd, VulkanGivesTheSameBits) {
  ROPEGEN_REQUIRE_GPU(vulkan, "vulkan");
  expect_correctly_rounded("vulkan", *vulkan.target);
}

}  // namespace
}  // namespace ropegen
