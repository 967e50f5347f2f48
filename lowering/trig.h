// Accurate, vectorisable sin/cos for every target: the angle and its
// reduction mod pi/2 in float64 (exact enough up to positions of 2^40), then
// float32 polynomials on [-pi/4, pi/4]. Halide's own sin/cos become scalar
// libm calls on CPU, and GPU intrinsics have loose error bounds; this is the
// same arithmetic everywhere, so every target computes the same bits.
#pragma once

#include <Halide.h>

namespace ropegen::lowering {

struct SinCos {
  Halide::Expr sin, cos;  // float32
};

SinCos accurate_sincos(const Halide::Expr& angle_f64);

}  // namespace ropegen::lowering
