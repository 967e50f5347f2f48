#include "trig.h"

#include "constant_table.h"

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
  const Expr k = round(angle_f64 * f64_constant(kTwoOverPi, prefix + "two_over_pi"));
  const Expr r = strict_float(cast<float>(angle_f64 - k * f64_constant(kPiOver2, prefix + "pi_over_2")));
  return Tuple(r, cast<int>(cast<int64_t>(k) & 3));
}

SinCos sincos_of_reduced(const Expr& r, const Expr& quadrant) {
  // Taylor series; on |r| <= pi/4 the first omitted terms are < 2e-9.
  const Expr r2 = r * r;
  const Expr sin_r =
      r + r * r2 * (-1.0f / 6 + r2 * (1.0f / 120 + r2 * (-1.0f / 5040 + r2 * (1.0f / 362880))));
  const Expr cos_r =
      1.0f + r2 * (-0.5f + r2 * (1.0f / 24 + r2 * (-1.0f / 720 + r2 * (1.0f / 40320 + r2 * (-1.0f / 3628800)))));
  // strict_float as above: Horner steps rounded one operation at a time.
  return {strict_float(select(quadrant == 0, sin_r, quadrant == 1, cos_r, quadrant == 2, -sin_r, -cos_r)),
          strict_float(select(quadrant == 0, cos_r, quadrant == 1, -sin_r, quadrant == 2, -cos_r, sin_r))};
}

}  // namespace ropegen::lowering
