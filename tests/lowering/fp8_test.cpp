// lowering/fp8: the correction that makes a GPU's division exact, fed
// quotients off by up to 2 ulp (as Vulkan's OpFDiv may be), gives the
// host's IEEE quotient; and fp8_from_float on the host against the
// reference's search over the 256 codes for every fp8 midpoint and its
// float32 neighbours, at several scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <Halide.h>

#include "lowering/fp8.h"
#include "support/float_bits.h"
#include "support/reference.h"

namespace ropegen {
namespace {

using namespace Halide;

using test::bits_of;
using test::float_from_bits;

TEST(Fp8Lowering, CorrectedQuotientIsIeeeWhateverTheApproximation) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  const int n = 4096;
  Buffer<float> x(n), scale(n);
  for (int i = 0; i < n; ++i) {
    x(i) = std::ldexp(mantissa(gen), exponent(gen)) * (i % 2 ? -1.0f : 1.0f);
    scale(i) = std::ldexp(mantissa(gen), exponent(gen) / 4);
  }
  for (int off : {-2, -1, 0, 1, 2}) {
    Var i;
    Func q0, fixed;
    // A quotient `off` ulp away from the IEEE one (magnitude steps).
    q0(i) = reinterpret<float>(reinterpret<uint32_t>(strict_float(x(i) / scale(i))) + cast<uint32_t>(off));
    fixed(i) = lowering::detail::correctly_rounded_quotient(x(i), scale(i), q0(i));
    Buffer<float> got = fixed.realize({n});
    for (int j = 0; j < n; ++j)
      ASSERT_EQ(bits_of(got(j)), bits_of(x(j) / scale(j)))
          << "off " << off << ": " << x(j) << " / " << scale(j) << " gave " << got(j);
  }
  // The correction is not a no-op: the perturbed quotients differ.
  EXPECT_NE(bits_of(float_from_bits(bits_of(x(0) / scale(0)) + 1)), bits_of(x(0) / scale(0)));
}

TEST(Fp8Lowering, CodesOfMidpointsAndNeighboursMatchTheReference) {
  std::vector<float> inputs;
  for (KvDType format : {KvDType::Fp8E4m3, KvDType::Fp8E5m2})
    for (int code = 0; code < 0x7f; ++code) {
      const double a = ref::fp8_value(format, static_cast<uint8_t>(code));
      const double b = ref::fp8_value(format, static_cast<uint8_t>(code + 1));
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const float mid = static_cast<float>((a + b) / 2);
      for (float v : {static_cast<float>(a), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)})
        inputs.push_back(v), inputs.push_back(-v);
    }
  inputs.insert(inputs.end(), {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 1e-45f, 3.4e38f, 470.0f, 61440.0f});
  const int n = static_cast<int>(inputs.size());
  Buffer<float> x(n);
  for (int i = 0; i < n; ++i) x(i) = inputs[i];
  for (KvDType format : {KvDType::Fp8E4m3, KvDType::Fp8E5m2})
    for (float s : {1.0f, 0.37f, 3.0f}) {
      Var i;
      Func codes;
      codes(i) = lowering::fp8_from_float(x(i), s, format);
      Buffer<uint8_t> got = codes.realize({n});
      for (int j = 0; j < n; ++j)
        ASSERT_EQ(got(j), ref::fp8_code(format, inputs[j], s))
            << (format == KvDType::Fp8E4m3 ? "e4m3" : "e5m2") << " x " << inputs[j] << " scale " << s;
    }
}

}  // namespace
}  // namespace ropegen
