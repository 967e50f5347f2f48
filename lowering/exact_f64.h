// floor and round-to-nearest-even of float64 values from their IEEE bits,
// in integer operations: Halide 21's round (and floor, or an int64 round
// trip, which LLVM turns into trunc) reach lavapipe as float64 rounding
// instructions that llvmpipe computes in float32 precision on CPUs without
// AVX-512 (measured, Mesa 22.3 on an AVX2 EPYC: round(3.5) = 3,
// round(16777217.3) = 16777217.3, so every RoPE kernel's frequency split
// was wrong by up to 5e-3 in cos/sin on Vulkan there). Shifts and masks
// of integers are exact on every target; the results are IEEE floor and
// roundeven, signed zeros included, for every finite input.
#pragma once

#include <Halide.h>

namespace ropegen::lowering {

Halide::Expr floor_f64(const Halide::Expr& x);
Halide::Expr round_even_f64(const Halide::Expr& x);

}  // namespace ropegen::lowering
