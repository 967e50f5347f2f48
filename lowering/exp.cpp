#include "exp.h"

#include "constant_table.h"
#include "exact_f64.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// 2^k as float32, for k in [-126, 127]: the exponent field set directly.
Expr pow2(const Expr& k) { return reinterpret<float>(cast<uint32_t>(k + 127) << 23); }

}  // namespace

Expr exp_to_float(const Expr& x, const std::string& name) {
  constexpr double kLog2E = 1.4426950408889634074, kLn2 = 0.69314718055994530942;
  // x = n ln2 + r, |r| <= ln2 / 2; n within two exponent ranges, so the
  // final scaling by 2^n (in two exact steps) overflows to inf by itself.
  // Constants from memory and no fused operations: trig.cpp says why.
  const Expr n = clamp(round_even_f64(x * f64_constant(kLog2E, name + "_log2_e")), Expr(-252.0), Expr(254.0));
  const Expr r = strict_float(cast<float>(x - n * f64_constant(kLn2, name + "_ln_2")));
  // Taylor series; on |r| <= 0.347 the first omitted term is < 6e-9.
  const Expr p =
      1.0f + r * (1.0f + r * (1.0f / 2 + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  const Expr k = cast<int>(n), k1 = k / 2;
  return select(x < Expr(-174.5), 0.0f, strict_float(p * pow2(k1) * pow2(k - k1)));
}

}  // namespace ropegen::lowering
