// Backward calls: rope only; with run-time frequencies or qk_norm, the
// forward's inputs (saved_q, saved_k); where the gradients summed over the
// call's rows go: dL/d(inv_freq) (d_freqs) with run-time frequencies, the
// norm weights' (d_q_norm_weight, d_k_norm_weight) with qk_norm weight
// per_head. The kernels write every summed gradient they compute, so each
// is required where it is computed and refused elsewhere.
#include <fmt/format.h>

#include "call/checks.h"

namespace ropegen::call {

bool check_frequency_vector(CheckContext& x, const Tensor& t, const char* name);  // frequency_checks.cpp

namespace {

void check_saved(CheckContext& x, const std::optional<Tensor>& s, const std::optional<Tensor>& like, const char* name,
                 const char* like_name, const char* why) {
  if (!like) {
    if (s) x.fail(name, fmt::format("{} is given without the gradient {} it belongs to", name, like_name));
    return;
  }
  if (!s)
    x.fail(name,
           fmt::format("this backward needs the forward input {} (shaped {}) for {}", name, shape_str(*like), why));
  else if (shape_of(*s) != shape_of(*like))
    x.fail(name, fmt::format("{} has shape {} but its gradient {} has {}: they must match", name, shape_str(*s),
                             like_name, shape_str(*like)));
}

// A summed gradient (`what`, float32 `shape`): given exactly where the
// kernel computes it (`by` says which backward does), then checked.
template <typename Check>
void check_summed(CheckContext& x, const std::optional<Tensor>& t, const char* name, bool computed, const char* by,
                  const char* what, const Shape& shape, Check&& check) {
  if (!computed) {
    if (t) x.fail(name, fmt::format("{} ({}) is only written by {}", name, what, by));
    return;
  }
  if (!t) {
    x.fail(name, fmt::format("{} writes {}: pass {}, float32 {}", by, what, name, shape_str(shape)));
    return;
  }
  check(*t);
}

}  // namespace

void check_backward(CheckContext& x) {
  const Call& call = x.call;
  if (call.backward && !is_rope(x.c))
    x.fail("backward", fmt::format("backward kernels are for rope specs; this spec is {}", encoding_name(x.c)));
  const bool frequency_gradient = call.backward && x.c.runtime_frequencies;
  const bool norm_gradient = call.backward && has_qk_norm(x.c);
  const bool weight_gradient = norm_gradient && x.c.qk_norm_weight;
  check_summed(x, call.d_freqs, "d_freqs", frequency_gradient,
               "the backward of a spec with `frequency: {scheme: runtime}`", "dL/d(inv_freq)", {x.c.rotary_dim / 2},
               [&](const Tensor& t) { check_frequency_vector(x, t, "d_freqs"); });
  const Shape head = {x.c.row_dim};
  auto norm_weight_gradient = [&](const std::optional<Tensor>& t, const char* name, const char* what, bool computed,
                                  const char* by) {
    check_summed(x, t, name, computed, by, what, head, [&](const Tensor& g) {
      if (shape_of(g) != head)
        x.fail(name, fmt::format("{} has shape {} but must be {} (head_dim)", name, shape_str(g), shape_str(head)));
    });
  };
  norm_weight_gradient(call.d_q_norm_weight, "d_q_norm_weight", "dL/d(q_norm_weight)", weight_gradient,
                       "the backward of a spec with `qk_norm: {weight: per_head}`");
  norm_weight_gradient(call.d_k_norm_weight, "d_k_norm_weight", "dL/d(k_norm_weight)",
                       weight_gradient && call.k.has_value(),
                       "the backward of k with a spec with `qk_norm: {weight: per_head}`");
  if (!frequency_gradient && !norm_gradient) {
    if (call.saved_q || call.saved_k)
      x.fail(call.saved_q ? "saved_q" : "saved_k",
             "saved forward inputs are only read by the backward of a spec with `frequency: {scheme: runtime}` (for "
             "dL/d(inv_freq)) or with qk_norm (for the norm's gradient)");
    return;
  }
  const char* why = norm_gradient ? "the norm's gradient (qk_norm)" : "dL/d(inv_freq)";
  check_saved(x, call.saved_q, call.q, "saved_q", "q", why);
  check_saved(x, call.saved_k, call.k, "saved_k", "k", why);
}

}  // namespace ropegen::call
