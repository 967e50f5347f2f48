// a * b + c rounded once (IEEE 754 fusedMultiplyAdd, float32), the same
// bits on every target. Halide 21 has no fused operation of its own
// (strict_fma came after it), and its strict_float forbids fusing; so the
// instruction is called directly where the target has one, and emulated
// exactly where it has not.
#pragma once

#include <Halide.h>

namespace ropegen::lowering {

// float32 a, b, c -> float32 round(a * b + c). Resolved when the pipeline is
// compiled: x86 with FMA (AVX2, AVX-512), 64-bit ARM and CUDA run the
// instruction (LLVM's llvm.fma, vectorised by LLVM as any arithmetic);
// SSE-only x86, 32-bit ARM and Vulkan (whose GLSL Fma may round twice)
// compute it in float64 and round to odd before the final rounding.
// Every result but a NaN is the same on every target; a NaN result is a
// NaN, its sign and payload unspecified: with NaN operands x86's
// instruction returns the one its encoding puts first (and LLVM picks the
// encoding), the emulation a product's first, CUDA a canonical NaN.
Halide::Expr fused_multiply_add(const Halide::Expr& a, const Halide::Expr& b, const Halide::Expr& c);

}  // namespace ropegen::lowering
