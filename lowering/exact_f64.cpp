#include "lowering/exact_f64.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// x rounded toward zero: the fraction's bits of the mantissa cleared
// (|x| < 1: a zero of x's sign; |x| >= 2^52: x, already an integer).
Expr trunc_f64(const Expr& x) {
  const Expr bits = reinterpret<uint64_t>(x);
  const Expr exponent = cast<int>((bits >> 52) & Expr(uint64_t{0x7ff})) - 1023;
  const Expr fraction_bits = cast<uint64_t>(clamp(52 - exponent, 0, 63));
  const Expr mask = select(exponent < 0, Expr(uint64_t{1} << 63), exponent >= 52, Expr(~uint64_t{0}),
                           ~((Expr(uint64_t{1}) << fraction_bits) - Expr(uint64_t{1})));
  return reinterpret<double>(bits & mask);
}

// `value` with x's sign when it is zero (IEEE floor and roundeven keep the sign).
Expr zero_with_sign_of(const Expr& value, const Expr& x) {
  const Expr sign = reinterpret<uint64_t>(x) & Expr(uint64_t{1} << 63);
  return select(value == Expr(0.0), reinterpret<double>(sign), value);
}

}  // namespace

Expr floor_f64(const Expr& x) {
  const Expr t = trunc_f64(x);
  return zero_with_sign_of(select(t > x, t - Expr(1.0), t), x);
}

Expr round_even_f64(const Expr& x) {
  const Expr f = floor_f64(x), rest = x - f;  // exact: rest in [0, 1)
  const Expr odd = floor_f64(f * Expr(0.5)) * Expr(2.0) != f;
  const Expr up = rest > Expr(0.5) || (rest == Expr(0.5) && odd);
  return zero_with_sign_of(select(up, f + Expr(1.0), f), x);
}

}  // namespace ropegen::lowering
