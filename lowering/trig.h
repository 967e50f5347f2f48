// Accurate, vectorisable sin/cos for every target: the angle and its
// reduction mod pi/2 in float64 (exact enough up to positions of 2^40) or
// in 32-bit fixed point (integer positions: as exact, cheaper); then float32
// polynomials on [-pi/4, pi/4]. Halide's own sin/cos become scalar
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
// The same reduction without float64, for integer positions 0 <= p <= 2^53
// (int32 or int64): 32-bit vectors at full width. The angle in quarter
// turns is p * g, g = inv_freq * 2/pi, in fixed point with units of 2^-30
// quarter turns: p's low 31 bits times floor(g 2^30) and its high bits
// times floor(g 2^61) wrap exactly mod 2^32 (= mod 4 quarter turns); the
// fractional parts add float32 products under 2^31. Two bits are the
// quadrant, the other 30 the angle in it. Error < 1.1e-7 up to positions
// of 2^24, then growing like the float64 path's (g is a float64); integer
// and IEEE float operations only: the same bits on every target.
// quarter_turns: quarter_turns_split of the pair's inv_freq.
Halide::Tuple reduce_angle_fixed(const Halide::Expr& position, const Halide::Tuple& quarter_turns);
// inv_freq (float64) as {floor(g 2^30) mod 2^32 (uint32), frac(g 2^30) (float32),
// floor(g 2^61) mod 2^32, frac(g 2^61)}, g = inv_freq * 2/pi.
Halide::Tuple quarter_turns_split(const Halide::Expr& inv_freq_f64, const std::string& prefix = "");
// sin and cos from a reduced angle (the two Tuple elements above).
SinCos sincos_of_reduced(const Halide::Expr& r, const Halide::Expr& quadrant);

}  // namespace ropegen::lowering
