#include "fp8.h"

#include <cmath>
#include <cstring>

#include "storage.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
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

float fp8_largest(KvDType format) { return format == KvDType::Fp8E4m3 ? 448.0f : 57344.0f; }

Expr fp8_from_float(const Expr& value, const Expr& scale, KvDType format, Fp8Scale rule) {
  const bool e4m3 = format == KvDType::Fp8E4m3;
  const int mantissa = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, dropped = 23 - mantissa;
  auto u32 = [](uint32_t v) { return Expr(v); };
  const Expr max_code = u32(e4m3 ? 0x7e : 0x7b);  // 448 = 1.75 * 2^8, 57344 = 1.75 * 2^15
  const Expr max_bits = u32(float_bits(fp8_largest(format)));
  const Expr min_normal_bits = u32(static_cast<uint32_t>(127 + 1 - bias) << 23);  // float32 bits of 2^(1 - bias)

  // The sign is x's (scale > 0), also for a NaN and a zero quotient:
  // NaN bits from a division differ between targets.
  const Expr sign = (reinterpret<uint32_t>(value) >> 24) & 0x80;
  // CPUs divide exactly (IEEE divps/divss, fdiv; strict_float keeps the
  // division a division), GPUs are corrected (compiled_for_gpu): the same
  // quotient everywhere.
  // The correction on CPUs too cost 3x (bench/kv_append_bench, 2-core VM,
  // one thread, prefill 1 x 512 into fp8_e4m3: 1002 us with it, 338 us
  // without; bf16 caches 148 us: the division is most of the rest).
  // A product is correctly rounded on every target (Vulkan's OpFMul too);
  // strict_float keeps it from being fused with the rotation's sums.
  const Expr q0 = strict_float(rule == Fp8Scale::Multiply ? value * scale : value / scale);
  const Expr quotient = rule == Fp8Scale::Multiply
                            ? q0
                            : select(compiled_for_gpu(), detail::correctly_rounded_quotient(value, scale, q0), q0);
  const Expr magnitude = reinterpret<uint32_t>(quotient) & 0x7fffffffu;
  // Normal codes: the float32 bits rebiased and rounded to `mantissa` bits
  // (nearest even) by one add, then shifted (a carry into the exponent is
  // the next code). The add wraps below the normal range, never used there.
  const uint32_t rebias_and_half = static_cast<uint32_t>(bias - 127) * (1u << 23) + (1u << (dropped - 1)) - 1;
  const Expr normal = (magnitude + u32(rebias_and_half) + ((magnitude >> dropped) & 1)) >> dropped;
  // Subnormal codes count steps of 2^(1 - bias - mantissa): adding 2^(24 -
  // bias - mantissa), whose float32 ulp is that step, rounds the magnitude
  // to a whole number of steps (nearest even: IEEE addition, exact on every
  // target), held in the sum's low bits; rounding up to 2^mantissa steps is
  // the smallest normal's code. A float32 denormal (or one a GPU flushes)
  // gives 0.
  const float step_magic = std::ldexp(1.0f, 24 - bias - mantissa);
  const Expr subnormal =
      reinterpret<uint32_t>(strict_float(reinterpret<float>(magnitude) + step_magic)) - u32(float_bits(step_magic));
  const Expr code = select(magnitude > u32(0x7f800000u), u32(0x7f),  // NaN
                           magnitude >= max_bits, max_code,          // saturated (infinities too)
                           magnitude >= min_normal_bits, normal, subnormal);
  return cast<uint8_t>(sign | code);
}

}  // namespace ropegen::lowering
