#include "fma.h"

#include "storage.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// LLVM's intrinsic, named as an extern: Halide declares it per lane and
// LLVM's vectoriser turns the lanes back into one vector fma
// (tests/targets/cpu_code_test checks the instruction is there).
Expr fma_instruction(const Expr& a, const Expr& b, const Expr& c) {
  return Internal::Call::make(Float(32), "llvm.fma.f32", {a, b, c}, Internal::Call::PureExtern);
}

// The product of two float32 is exact in float64 (24 + 24 bits, and its
// exponent in range), and so is each addend; the float64 sum is rounded to
// odd (its last bit set where the sum was inexact), which rounded to
// float32 gives the correctly rounded result (Boldo & Melquiond, "Emulation
// of FMA and correctly rounded sums: proved algorithms using rounding to
// odd", IEEE TC 2008: 53 >= 24 + 2 bits). The sum's error comes from
// Fast2Sum (exact, the larger addend first).
Expr fma_in_float64(const Expr& a, const Expr& b, const Expr& c) {
  const Expr product = cast<double>(a) * cast<double>(b), addend = cast<double>(c);
  const Expr sum = product + addend;
  const Expr product_larger = abs(product) >= abs(addend);
  const Expr larger = select(product_larger, product, addend), smaller = select(product_larger, addend, product);
  const Expr error = smaller - (sum - larger);
  // A sum that rounds to zero is exact (gradual underflow), so an inexact
  // sum has a sign; its odd neighbour toward the exact value is one unit
  // away in the bits, up in magnitude when the error has the sum's sign.
  const Expr zero = Expr(0.0), bits = reinterpret<int64_t>(sum);
  const Expr round_to_odd = error != zero && (bits & 1) == 0 && is_finite(sum);
  const Expr step = select((error > zero) == (sum > zero), cast<int64_t>(1), cast<int64_t>(-1));
  return cast<float>(reinterpret<double>(select(round_to_odd, bits + step, bits)));
}

// Where the instruction is: on x86 with FMA, or any feature Halide's x86
// code generator completes with it (AVX2 and every AVX-512 level: a target
// string may name only avx512_zen4); AArch64 always has it, and CUDA's
// fma.rn.f32 is the same operation. Vulkan's GLSL Fma may round twice.
Expr has_fma_instruction() {
  const Expr x86_fma = target_has_any_feature({Target::FMA, Target::AVX2, Target::AVX512, Target::AVX512_KNL,
                                               Target::AVX512_Skylake, Target::AVX512_Cannonlake, Target::AVX512_Zen4,
                                               Target::AVX512_Zen5, Target::AVX512_SapphireRapids});
  const Expr x86 = target_arch_is(Target::X86) && x86_fma;
  const Expr arm64 = target_arch_is(Target::ARM) && target_bits() == 64;
  return target_has_feature(Target::CUDA) || (!compiled_for_gpu() && (x86 || arm64));
}

}  // namespace

Expr fused_multiply_add(const Expr& a, const Expr& b, const Expr& c) {
  return strict_float(select(has_fma_instruction(), fma_instruction(a, b, c), fma_in_float64(a, b, c)));
}

}  // namespace ropegen::lowering
