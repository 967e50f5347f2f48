#include "lowering/frequency_gradient.h"

#include "lowering/cos_sin.h"
#include "lowering/rope_algorithm.h"
#include "lowering/rotation.h"
#include "lowering/storage.h"
#include "lowering/token_sum.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// The term of dL/d(inv_freq) that pair r of row (h, s, b) of one tensor
// adds: its position times dL/dangle. With y the forward rotation of the
// saved input pair and g the upstream gradient, dL/dangle = g1*y0 - g0*y1
// (times the xPos scale). The saved input sits where the forward read it
// (the kernel spec's output pairing), g where the forward wrote.
Expr frequency_gradient(const RopeSpec& spec, const RopeAlgorithm& a, const RotatedTensor& t, bool is_key,
                        const Expr& h, const Expr& s, const Expr& b) {
  auto load = [&](const ImageParam& in, Pairing pairing, int m) {
    return load_as_float(in(dim_of(spec, pairing, a.r, m), h, s, b), spec.dtype);
  };
  const Expr x0 = load(t.saved, spec.output_pairing, 0), x1 = load(t.saved, spec.output_pairing, 1);
  const Expr g0 = load(t.input, spec.pairing, 0), g1 = load(t.input, spec.pairing, 1);
  const Expr c = a.gradient.cos_sin(a.r, s, b)[0], sn = a.gradient.cos_sin(a.r, s, b)[1];
  Expr d_angle = g1 * (x0 * c - x1 * sn) - g0 * (x1 * c + x0 * sn);
  if (spec.xpos.enabled) d_angle *= a.gradient.xpos_scale(a.r, s, b)[is_key ? 1 : 0];
  return a.position(a.r, s, b) * cast<double>(strict_float(d_angle));
}

}  // namespace

// One order of float64 additions, whatever the target or its threads (token_sum.h).
void define_frequency_gradient(const RopeSpec& spec, RopeAlgorithm& a, const RopeFrequencies& freqs) {
  const Type type = storage_type(spec.dtype);
  FrequencyGradient& g = a.gradient;
  const CosSinStages own = own_cos_sin_stages(spec, a, freqs, "d_freqs_");
  g.reduced = own.reduced, g.cos_sin = own.cos_sin, g.xpos_scale = own.xpos_scale;
  Func token = float64_zeros("d_freqs_level0", {a.r, a.s, a.b});
  for (RotatedTensor* t : {&a.q, &a.k}) {
    if (!t->input.defined()) continue;
    const Arg saved = t == &a.q ? Arg::SavedQ : Arg::SavedK;
    t->saved = a.make_input(saved, type, 4);
    a.use(saved);
    RDom heads(t->input.dim(1).min(), t->input.dim(1).extent(), t == &a.q ? "q_heads" : "k_heads");
    token(a.r, a.s, a.b) += frequency_gradient(spec, a, *t, t == &a.k, heads, a.s, a.b);
  }
  g.sums = sum_over_tokens(token, a.r, a, "d_freqs");
  g.d_freqs = Func("d_freqs");
  g.d_freqs(a.r) = cast<float>(g.sums.sum(a.r));
}

}  // namespace ropegen::lowering
