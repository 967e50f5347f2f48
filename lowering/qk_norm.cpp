#include "lowering/qk_norm.h"

#include "abi/kernel_abi.h"
#include "lowering/constant_table.h"
#include "lowering/rope_algorithm.h"
#include "lowering/storage.h"

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

}  // namespace

void define_qk_norm(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, abi::Arg weight) {
  const int head_dim = spec.head_dim;
  const Var& d = a.d;
  auto x = [&](const Expr& dim) { return load_as_float(t.input(dim, a.h, a.s, a.b), spec.dtype); };

  // Dim 8i + j goes to sum j; a dim past the head adds an exact zero.
  const int rounds = (head_dim + kNormPartialSums - 1) / kNormPartialSums;
  RDom i(0, rounds, std::string(t.input.name()) + "_norm_rounds");
  const Expr dim = i * kNormPartialSums + d;
  const Expr value = cast<double>(x(min(dim, head_dim - 1)));
  t.square_sums = Func(std::string(t.input.name()) + "_square_sums");
  t.square_sums(d, a.h, a.s, a.b) = cast<double>(0);
  t.square_sums(d, a.h, a.s, a.b) += strict_float(select(dim < head_dim, value * value, cast<double>(0)));

  Expr sum = t.square_sums(0, a.h, a.s, a.b);
  for (int j = 1; j < kNormPartialSums; ++j) sum = sum + t.square_sums(j, a.h, a.s, a.b);
  // 1 / head_dim and eps from tables: Halide 21's Vulkan backend rounds
  // float64 immediates. Only float64 multiplies and adds, which every
  // target rounds alike (Vulkan's float64 division and sqrt are neither
  // exact nor there).
  const std::string name = t.input.name();
  const Expr m = sum * f64_constant(1.0 / head_dim, name + "_norm_inv_dim") +
                 f64_constant(spec.qk_norm.eps, name + "_norm_eps");
  t.inv_rms = Func(name + "_inv_rms");
  t.inv_rms(a.h, a.s, a.b) = strict_float(inverse_sqrt(m));

  Expr normed = x(d) * t.inv_rms(a.h, a.s, a.b);
  if (spec.qk_norm.has_weight()) {
    ImageParam& w = a.make_input(weight, storage_type(spec.dtype), 1);
    a.use(weight);
    const Expr wd = load_as_float(w(d), spec.dtype);
    normed = normed * (spec.qk_norm.type == QkNormType::RmsOnePlus ? 1.0f + wd : wd);
  }
  t.normed = Func(std::string(t.input.name()) + "_normed");
  t.normed(d, a.h, a.s, a.b) = strict_float(normed);
}

void define_whole_row_output(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t) {
  const Var& d = a.d;
  const int off = spec.rotary_offset, half = spec.num_pairs();
  // Pair and member of dim d in the output pairing, clamped into the rotary
  // range (a dim outside it selects normed, but Halide still bounds the
  // loads); likely(): the loop over the row is partitioned so that inside
  // the range there is no clamp. r and m are written so that rotated's
  // storage (half: (r, m); interleaved: (m, r), a schedule's choice)
  // flattens back to the dense index j.
  const Expr j = clamp(likely(d - off), 0, spec.rotary_dim - 1);
  Expr r, m;
  if (spec.output_pairing == Pairing::Interleaved) r = j / 2, m = j % 2;
  else r = j % half, m = j / half;
  const Expr rotated = t.rotated(r, m, a.h, a.s, a.b);
  const Expr in_range = d >= off && d < off + spec.rotary_dim;
  t.output(d, a.h, a.s, a.b) = store_from_float(select(in_range, rotated, t.normed(d, a.h, a.s, a.b)), spec.dtype,
                                                Bf16Rounding::InstructionWhereAvailable);
  // The head dim is known whole: the call passes whole rows.
  t.output.output_buffer().dim(0).set_bounds(0, spec.head_dim);
}

}  // namespace ropegen::lowering
