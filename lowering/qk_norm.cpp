#include "lowering/qk_norm.h"

#include <functional>

#include "abi/kernel_abi.h"
#include "lowering/constant_table.h"
#include "lowering/fma.h"
#include "lowering/rope_algorithm.h"
#include "lowering/rotation.h"
#include "lowering/storage.h"
#include "lowering/token_sum.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// The float32 y nearest 1 / sqrt(m) by |y^2 m - 1| (float64 multiplies
// only), among the five floats around a float32 estimate: targets whose
// sqrt and division round differently (GPUs allow several ulps) pick the
// same y, as their estimates are within two ulps of it.
Expr inverse_sqrt(const Expr& m) {
  const Expr estimate = 1.0f / sqrt(cast<float>(m));
  const Expr bits = reinterpret<int32_t>(estimate);
  auto miss = [&](const Expr& y) {
    const Expr yd = cast<double>(y);
    const Expr e = yd * yd * m - cast<double>(1);
    return e * e;
  };
  Expr best = estimate, best_miss = miss(estimate);
  for (int step : {-2, -1, 1, 2}) {
    const Expr y = reinterpret<float>(bits + step);
    const Expr y_miss = miss(y);
    best = select(y_miss < best_miss, y, best);
    best_miss = select(y_miss < best_miss, y_miss, best_miss);
  }
  return best;
}

// Float64 sums (j, h, s, b) of term(dim) over a head's dims in the fixed
// order: dim 8i + j into sum j (a dim past the head adds an exact zero).
// term's float32 operands make its products exact in float64.
Func partial_sums(const std::string& name, int head_dim, const RopeAlgorithm& a,
                  const std::function<Expr(const Expr&)>& term) {
  const int rounds = (head_dim + kNormPartialSums - 1) / kNormPartialSums;
  RDom i(0, rounds, name + "_rounds");
  const Expr dim = i * kNormPartialSums + a.d;
  Func sums(name);
  sums(a.d, a.h, a.s, a.b) = cast<double>(0);
  sums(a.d, a.h, a.s, a.b) += strict_float(select(dim < head_dim, term(min(dim, head_dim - 1)), cast<double>(0)));
  return sums;
}

Expr total(const Func& sums, const RopeAlgorithm& a) {
  Expr sum = sums(0, a.h, a.s, a.b);
  for (int j = 1; j < kNormPartialSums; ++j) sum = sum + sums(j, a.h, a.s, a.b);
  return sum;
}

// w' at a dim: w, 1 + w (rms_one_plus), or 1 without a weight; w in the
// spec's dtype or (the variant's float32_norm_weights) float32.
std::function<Expr(const Expr&)> weight_factor(const RopeSpec& spec, RopeAlgorithm& a, abi::Arg weight) {
  if (!spec.qk_norm.has_weight()) return [](const Expr&) { return Expr(1.0f); };
  const DType dtype = a.variant.float32_norm_weights ? DType::F32 : spec.dtype;
  ImageParam w = a.make_input(weight, storage_type(dtype), 1);
  a.use(weight);
  const bool one_plus = spec.qk_norm.type == QkNormType::RmsOnePlus;
  return [w, dtype, one_plus](const Expr& dim) {
    const Expr wd = load_as_float(w(dim), dtype);
    return one_plus ? 1.0f + wd : wd;
  };
}

// t.square_sums and t.inv_rms of the rows x reads, named from `name`.
void define_inverse_rms(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t,
                        const std::function<Expr(const Expr&)>& x, const std::string& name) {
  t.square_sums = partial_sums(name + "_square_sums", spec.head_dim, a, [&](const Expr& dim) {
    const Expr value = cast<double>(x(dim));
    return value * value;
  });
  // 1 / head_dim and eps from tables: Halide 21's Vulkan backend rounds
  // float64 immediates. Only float64 multiplies and adds, which every
  // target rounds alike (Vulkan's float64 division and sqrt are neither
  // exact nor there).
  const Expr m = total(t.square_sums, a) * f64_constant(1.0 / spec.head_dim, name + "_norm_inv_dim") +
                 f64_constant(spec.qk_norm.eps, name + "_norm_eps");
  t.inv_rms = Func(name + "_inv_rms");
  t.inv_rms(a.h, a.s, a.b) = strict_float(inverse_sqrt(m));
}

}  // namespace

void define_qk_norm(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, abi::Arg weight) {
  auto x = [&](const Expr& dim) { return load_as_float(t.input(dim, a.h, a.s, a.b), spec.dtype); };
  define_inverse_rms(spec, a, t, x, t.input.name());
  Expr normed = x(a.d) * t.inv_rms(a.h, a.s, a.b);
  if (spec.qk_norm.has_weight()) normed = normed * weight_factor(spec, a, weight)(a.d);
  t.normed = Func(std::string(t.input.name()) + "_normed");
  t.normed(a.d, a.h, a.s, a.b) = strict_float(normed);
}

void define_qk_norm_backward(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, abi::Arg weight,
                             abi::Arg saved) {
  const std::string name = t.input.name();
  t.saved = a.make_input(saved, storage_type(spec.dtype), 4);
  a.use(saved);
  auto x = [&](const Expr& dim) { return load_as_float(t.saved(dim, a.h, a.s, a.b), spec.dtype); };
  define_inverse_rms(spec, a, t, x, name);
  // dL/d(normed): the rotary dims rotated back (t.rotated), the others as they came.
  t.normed_gradient = Func(name + "_normed_gradient");
  t.normed_gradient(a.d, a.h, a.s, a.b) =
      whole_row(spec, a, t, load_as_float(t.input(a.d, a.h, a.s, a.b), spec.dtype), a.h);
  // g = dL/d(normed) w': the gradient of x / rms.
  const auto w = weight_factor(spec, a, weight);
  auto g = [&](const Expr& dim) {
    const Expr dn = t.normed_gradient(dim, a.h, a.s, a.b);
    return spec.qk_norm.has_weight() ? strict_float(dn * w(dim)) : dn;
  };
  t.dot_sums = partial_sums(name + "_dot_sums", spec.head_dim, a,
                            [&](const Expr& dim) { return cast<double>(g(dim)) * cast<double>(x(dim)); });
  // dL/dx = (g - x c) / rms with c = (g . x) / (head_dim rms^2); -c, float32,
  // from float64 multiplies (the negative 1 / head_dim makes it exact).
  const Expr inv_rms = cast<double>(t.inv_rms(a.h, a.s, a.b));
  t.norm_coefficient = Func(name + "_norm_coefficient");
  t.norm_coefficient(a.h, a.s, a.b) = strict_float(cast<float>(
      inv_rms * inv_rms * total(t.dot_sums, a) * f64_constant(-1.0 / spec.head_dim, name + "_minus_inv_dim")));
  const Expr dx = fused_multiply_add(x(a.d), t.norm_coefficient(a.h, a.s, a.b), g(a.d)) * t.inv_rms(a.h, a.s, a.b);
  t.output(a.d, a.h, a.s, a.b) =
      store_from_float(strict_float(dx), spec.dtype, Bf16Rounding::InstructionWhereAvailable);
  t.output.output_buffer().dim(0).set_bounds(0, spec.head_dim);
}

void define_norm_weight_gradient(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t, bool is_key,
                                 abi::Arg output) {
  const std::string name = abi::info(output).name;
  WeightGradient& g = t.weight_gradient;
  // The rotation back and 1 / rms again, in stages of the gradient's own.
  RotatedTensor own;
  own.input = t.input;
  own.rotated = Func(name + "_rotated");
  define_rotation(spec, a, own, is_key, false, a.norm_gradient.cos_sin, a.norm_gradient.xpos_scale);
  auto x = [&](const Expr& dim, const Expr& h) { return load_as_float(t.saved(dim, h, a.s, a.b), spec.dtype); };
  define_inverse_rms(
      spec, a, own, [&](const Expr& dim) { return x(dim, a.h); }, name);
  g.rotated = own.rotated, g.square_sums = own.square_sums, g.inv_rms = own.inv_rms;
  // Level 0: the token's heads in turn, each dL/d(normed) x / rms; the
  // product of two floats is exact in float64, the third rounds once.
  g.heads = RDom(t.input.dim(1).min(), t.input.dim(1).extent(), name + "_heads");
  const Expr h = g.heads.x;
  const Expr dn = whole_row(spec, a, own, load_as_float(t.input(a.d, h, a.s, a.b), spec.dtype), h);
  Func token = float64_zeros(name + "_level0", {a.d, a.s, a.b});
  token(a.d, a.s, a.b) +=
      strict_float(cast<double>(dn) * cast<double>(x(a.d, h)) * cast<double>(g.inv_rms(h, a.s, a.b)));
  g.sums = sum_over_tokens(token, a.d, a, name);
  g.d_weight = Func(name);
  g.d_weight(a.d) = cast<float>(g.sums.sum(a.d));
}

}  // namespace ropegen::lowering
