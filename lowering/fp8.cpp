#include "fp8.h"

#include "storage.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// value >> shift rounded to nearest even (shift in 1..31).
Expr shift_right_to_nearest_even(const Expr& value, const Expr& shift) {
  const Expr half_less_one = (cast<uint32_t>(1) << (shift - 1)) - 1;
  return (value + half_less_one + ((value >> shift) & 1)) >> shift;
}

}  // namespace

namespace detail {

// x / scale rounded to float32 exactly, whatever the target's division:
// Vulkan only promises OpFDiv to 2.5 ulp (lavapipe and x86 divide exactly).
// The approximate quotient q0 and its neighbours up to 2 ulp away are compared by
// |x - q * scale| in float64, where the product of two floats and the
// difference are exact (float64 multiplication and subtraction are exact
// roundings on every backend); the least is the correctly rounded quotient
// (the true quotient is never a float32 midpoint: x = m * scale with m of
// 25 odd bits has no 24-bit x). NaN and infinities keep q0 (a neighbour's
// error is NaN, or not less).
Expr correctly_rounded_quotient(const Expr& x, const Expr& scale, const Expr& q0) {
  const Expr x64 = cast<double>(x), s64 = cast<double>(scale);
  auto error = [&](const Expr& q) { return strict_float(abs(x64 - cast<double>(q) * s64)); };
  const Expr bits = reinterpret<uint32_t>(q0);  // +-1 steps the magnitude (wrapping past 0 gives a NaN)
  Expr best = q0, best_error = error(q0);
  for (int step : {-2, -1, 1, 2}) {
    const Expr q = reinterpret<float>(bits + cast<uint32_t>(step));
    const Expr e = error(q);
    const Expr better = e < best_error;
    best = select(better, q, best);
    best_error = select(better, e, best_error);
  }
  return best;
}

}  // namespace detail

Expr fp8_from_float(const Expr& value, const Expr& scale, KvDType format) {
  const bool e4m3 = format == KvDType::Fp8E4m3;
  const int mantissa = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  auto u32 = [](uint32_t v) { return Expr(v); };
  const Expr max_code = u32(e4m3 ? 0x7e : 0x7b);                // 448 = 1.75 * 2^8, 57344 = 1.75 * 2^15
  const Expr max_bits = u32(e4m3 ? 0x43e00000u : 0x47600000u);   // the same as float32
  const Expr min_normal_exponent = u32(127 + 1 - bias);          // float32 biased exponent of 2^(1 - bias)

  // The sign is x's (scale > 0), also for a NaN and a zero quotient:
  // NaN bits from a division differ between targets.
  const Expr sign = (reinterpret<uint32_t>(value) >> 24) & 0x80;
  // CPUs divide exactly (IEEE divps/divss, fdiv; strict_float keeps the
  // division a division), GPUs are corrected (compiled_for_gpu): the same
  // quotient everywhere.
  // The correction on CPUs too cost 3x (bench/kv_append_bench, 2-core VM,
  // one thread, prefill 1 x 512 into fp8_e4m3: 1002 us with it, 338 us
  // without; bf16 caches 148 us: the division is most of the rest).
  const Expr q0 = strict_float(value / scale);
  const Expr quotient = select(compiled_for_gpu(), detail::correctly_rounded_quotient(value, scale, q0), q0);
  const Expr magnitude = reinterpret<uint32_t>(quotient) & 0x7fffffffu;
  const Expr exponent = magnitude >> 23;
  // Normal codes: drop 23 - mantissa bits, rounding to nearest even, and
  // rebias the exponent (a carry into the exponent is the next code).
  const Expr normal = shift_right_to_nearest_even(magnitude, cast<uint32_t>(23 - mantissa)) -
                      cast<uint32_t>((127 - bias) << mantissa);
  // Subnormal codes count 2^(1 - bias - mantissa): the float32 significand
  // (implicit bit included) shifted right by 150 - exponent - (bias - 1 +
  // mantissa), rounded to nearest even; a shift past 25 leaves 0 (a float32
  // denormal is 0 too). Rounding up to 2^mantissa gives the smallest
  // normal's code.
  const Expr significand = select(exponent == 0, magnitude, (magnitude & 0x7fffff) | 0x800000);
  const Expr shift = clamp(cast<int32_t>(150 - (bias - 1 + mantissa)) - cast<int32_t>(exponent), 1, 31);
  const Expr subnormal = shift_right_to_nearest_even(significand, cast<uint32_t>(shift));
  const Expr code = select(magnitude > u32(0x7f800000u), u32(0x7f),  // NaN
                           magnitude >= max_bits, max_code,    // saturated (infinities too)
                           exponent >= min_normal_exponent, normal, subnormal);
  return cast<uint8_t>(sign | code);
}

}  // namespace ropegen::lowering
