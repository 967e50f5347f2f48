#include "trig.h"

#include "constant_table.h"
#include "exact_f64.h"

namespace ropegen::lowering {

using namespace Halide;

Tuple reduce_angle(const Expr& angle_f64, const std::string& prefix) {
  constexpr double kPiOver2 = 1.57079632679489661923;
  constexpr double kTwoOverPi = 0.63661977236758134308;
  // In float64 the product and the reduction stay exact to ~1e-9 rad for
  // angles up to ~1e7 (positions up to 2^24 at inv_freq 1); the polynomial
  // then only ever sees |r| <= pi/4.
  // The constants come from memory: lowering/constant_table.h says why.
  // strict_float: no fused multiply-add, so every target rounds the same
  // operations the same way (a CPU fused k * pi/2 into the subtraction,
  // lavapipe did not: 1-3 ulp apart in cos/sin).
  const Expr k = round_even_f64(angle_f64 * f64_constant(kTwoOverPi, prefix + "two_over_pi"));
  const Expr r = strict_float(cast<float>(angle_f64 - k * f64_constant(kPiOver2, prefix + "pi_over_2")));
  return Tuple(r, cast<int>(cast<int64_t>(k) & 3));
}

Tuple quarter_turns_split(const Expr& inv_freq_f64, const std::string& prefix) {
  // 2/pi * 2^30: a power-of-two scaling, exact.
  constexpr double kUnitsPerRadian = 0.63661977236758134308 * 1073741824.0;
  const Expr g = inv_freq_f64 * f64_constant(kUnitsPerRadian, prefix + "units_per_radian");
  // x (< 2^63, >= 0) as floor(x) mod 2^32 and frac(x) < 1: exact in float64
  // but for the fraction's rounding to float32 (kept below 1, so that a
  // product with a position under 2^31 stays under 2^31).
  auto split = [](const Expr& x) {
    const Expr whole = floor_f64(x);
    const Expr low32 = whole - floor_f64(whole * Expr(1.0 / 4294967296.0)) * Expr(4294967296.0);
    return std::make_pair(cast<uint32_t>(strict_float(low32)), strict_float(min(cast<float>(x - whole), 0.99999994f)));
  };
  const auto [g_whole, g_fraction] = split(g);
  const auto [h_whole, h_fraction] = split(g * Expr(2147483648.0));  // g * 2^31, for the position's bits from 2^31 up
  return Tuple(std::vector<Expr>{g_whole, g_fraction, h_whole, h_fraction});
}

Tuple reduce_angle_fixed(const Expr& position, const Tuple& quarter_turns) {
  constexpr float kRadiansPerUnit = 1.57079632679489661923f / 1073741824.0f;  // exact scaling
  // p * g in units of 2^-30 quarter turns, mod 2^32 (uint32 wraps): each
  // 31-bit part of p times the integer part of its g, plus a float32
  // product (under 2^31, truncated: < 1 unit) for the fraction.
  auto turns = [&](const Expr& part, int i) {
    const Expr rest = cast<uint32_t>(cast<int>(strict_float(cast<float>(part) * quarter_turns[i + 1])));
    return cast<uint32_t>(part) * quarter_turns[i] + rest;
  };
  Expr t;
  if (position.type().bits() <= 32) {
    t = turns(position, 0);  // 0 <= p < 2^31
  } else {
    t = turns(cast<int>(position & Expr((int64_t{1} << 31) - 1)), 0) + turns(cast<int>(position >> 31), 2);
  }
  // t = quadrant * 2^30 + r with r in [-2^29, 2^29): the low 30 bits, sign-extended.
  const Expr r = reinterpret<int32_t>(t << 2) >> 2;
  const Expr quadrant = cast<int>((t + Expr(uint32_t{1} << 29)) >> 30);
  return Tuple(strict_float(cast<float>(r) * kRadiansPerUnit), quadrant);
}

SinCos sincos_of_reduced(const Expr& r, const Expr& quadrant) {
  // Taylor series; on |r| <= pi/4 the first omitted terms are < 2e-9.
  const Expr r2 = r * r;
  const Expr sin_r =
      r + r * r2 * (-1.0f / 6 + r2 * (1.0f / 120 + r2 * (-1.0f / 5040 + r2 * (1.0f / 362880))));
  const Expr cos_r =
      1.0f + r2 * (-0.5f + r2 * (1.0f / 24 + r2 * (-1.0f / 720 + r2 * (1.0f / 40320 + r2 * (-1.0f / 3628800)))));
  // Quadrants 1 and 3 swap sin and cos; sin is negative in 2 and 3, cos in
  // 1 and 2: one select each and a sign bit, not three (the same values:
  // negation is a sign flip on every target).
  const Expr odd = (quadrant & 1) != 0;
  auto negate_if = [](const Expr& x, const Expr& bit2) {
    return reinterpret<float>(reinterpret<uint32_t>(x) ^ (cast<uint32_t>(bit2 & 2) << 30));
  };
  // strict_float as above: Horner steps rounded one operation at a time.
  return {negate_if(strict_float(select(odd, cos_r, sin_r)), quadrant),
          negate_if(strict_float(select(odd, sin_r, cos_r)), quadrant + 1)};
}

}  // namespace ropegen::lowering
