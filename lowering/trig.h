// Accurate, vectorisable sin/cos for every target: the angle and its
// reduction mod pi/2 in float64 (exact enough up to positions of 2^40), then
// float32 polynomials on [-pi/4, pi/4]. Halide's own sin/cos become scalar
// libm calls on CPU, and GPU intrinsics have loose error bounds; this is the
// same arithmetic everywhere, so every target computes the same bits.
#pragma once

#include <string>

#include <Halide.h>

namespace ropegen::lowering {

struct SinCos {
  Halide::Expr sin, cos;  // float32
};

// The angle reduced to r in [-pi/4, pi/4] (float32) and its quadrant (int32):
// angle = quadrant * pi/2 + r (mod 2 pi). A Tuple, so a schedule can compute
// it once for both sin and cos. `prefix` names its constants (unique in a pipeline).
Halide::Tuple reduce_angle(const Halide::Expr& angle_f64, const std::string& prefix = "");
// sin and cos from a reduced angle (the two Tuple elements above).
SinCos sincos_of_reduced(const Halide::Expr& r, const Halide::Expr& quadrant);

}  // namespace ropegen::lowering
