// qk_norm's weights: a [head_dim] vector per rotated tensor, for specs
// whose norm has `weight: per_head`, and nothing otherwise.
#include <fmt/format.h>

#include "call/checks.h"

namespace ropegen::call {
namespace {

void check_weight(CheckContext& x, Arg a, bool needed) {
  const char* name = x.name(a);
  const std::optional<Tensor>& w = x.given(a);
  if (!has_qk_norm(x.c) || !x.c.qk_norm_weight) {
    if (w)
      x.fail(name, fmt::format("{} is for specs with `qk_norm: {{weight: per_head}}`; this spec {}", name,
                               has_qk_norm(x.c) ? "normalises without a weight (weight: none)" : "has no qk_norm"));
    return;
  }
  if (!needed) {
    if (w) x.fail(name, fmt::format("{} is given without k", name));
    return;
  }
  if (!w) {
    x.fail(name, fmt::format("the spec has `qk_norm: {{weight: per_head}}`: pass {}, shaped ({},) in the spec's "
                             "dtype or float32",
                             name, x.c.row_dim));
    return;
  }
  if (w->rank != 1 || w->shape[0] != x.c.row_dim)
    x.fail(name, fmt::format("{} has shape {} but must be ({},) (head_dim)", name, shape_str(*w), x.c.row_dim));
}

}  // namespace

void check_norm_weights(CheckContext& x) {
  check_weight(x, Arg::QNormWeight, true);
  check_weight(x, Arg::KNormWeight, x.k.has_value());
  // One kernel reads both in one type (the spec's, or float32).
  const std::optional<Tensor>&wq = x.given(Arg::QNormWeight), &wk = x.given(Arg::KNormWeight);
  if (wq && wk && wq->type != wk->type)
    x.fail("k_norm_weight", fmt::format("k_norm_weight has dtype {} but q_norm_weight {}: pass both in one dtype",
                                        to_string(wk->type), to_string(wq->type)));
  // The frequency gradient would need the normed rows (recomputed from the
  // saved inputs) where it reads the saved inputs: not generated.
  if (has_qk_norm(x.c) && x.call.backward && x.c.runtime_frequencies)
    x.fail("backward",
           "the backward of a qk_norm spec with `frequency: "
           "{scheme: runtime}` is not generated (dL/d(inv_freq) of "
           "normed rows); train the frequencies without qk_norm or "
           "keep them fixed");
}

}  // namespace ropegen::call
