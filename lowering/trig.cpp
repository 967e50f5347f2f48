#include "trig.h"

namespace ropegen::lowering {

using namespace Halide;

Tuple reduce_angle(const Expr& angle_f64) {
  constexpr double kPiOver2 = 1.57079632679489661923;
  constexpr double kTwoOverPi = 0.63661977236758134308;
  // In float64 the product and the reduction stay exact to ~1e-9 rad for
  // angles up to ~1e7 (positions up to 2^24 at inv_freq 1); the polynomial
  // then only ever sees |r| <= pi/4.
  const Expr k = round(angle_f64 * Expr(kTwoOverPi));
  const Expr r = cast<float>(angle_f64 - k * Expr(kPiOver2));
  return Tuple(r, cast<int>(cast<int64_t>(k) & 3));
}

SinCos sincos_of_reduced(const Expr& r, const Expr& quadrant) {
  // Taylor series; on |r| <= pi/4 the first omitted terms are < 2e-9.
  const Expr r2 = r * r;
  const Expr sin_r =
      r + r * r2 * (-1.0f / 6 + r2 * (1.0f / 120 + r2 * (-1.0f / 5040 + r2 * (1.0f / 362880))));
  const Expr cos_r =
      1.0f + r2 * (-0.5f + r2 * (1.0f / 24 + r2 * (-1.0f / 720 + r2 * (1.0f / 40320 + r2 * (-1.0f / 3628800)))));
  return {select(quadrant == 0, sin_r, quadrant == 1, cos_r, quadrant == 2, -sin_r, -cos_r),
          select(quadrant == 0, cos_r, quadrant == 1, -sin_r, quadrant == 2, -cos_r, sin_r)};
}

}  // namespace ropegen::lowering
