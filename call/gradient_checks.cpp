// Backward calls: rope only; with run-time frequencies or qk_norm, the
// forward's inputs (saved_q, saved_k); with run-time frequencies, where
// dL/d(inv_freq) goes (d_freqs).
#include <fmt/format.h>

#include "call/checks.h"

namespace ropegen::call {

bool check_frequency_vector(CheckContext& x, const Tensor& t, const char* name);  // frequency_checks.cpp

void check_backward(CheckContext& x) {
  const Call& call = x.call;
  if (call.backward && !is_rope(x.c))
    x.fail("backward", fmt::format("backward kernels are for rope specs; this spec is {}", encoding_name(x.c)));
  // The gradients that read the forward's inputs.
  const bool frequency_gradient = call.backward && x.c.runtime_frequencies;
  const bool norm_gradient = call.backward && has_qk_norm(x.c);
  if (call.d_freqs && !frequency_gradient)
    x.fail("d_freqs",
           "d_freqs (dL/d(inv_freq)) is only written by the "
           "backward of a spec with `frequency: {scheme: runtime}`");
  if (!frequency_gradient && !norm_gradient) {
    if (call.saved_q || call.saved_k)
      x.fail(call.saved_q ? "saved_q" : "saved_k",
             "saved forward inputs are only read by the backward of a spec "
             "with `frequency: {scheme: runtime}` (for "
             "dL/d(inv_freq)) or with qk_norm (for the norm's gradient)");
    return;
  }
  const char* why = norm_gradient ? "the norm's gradient (qk_norm)" : "dL/d(inv_freq)";
  auto check_saved = [&](const std::optional<Tensor>& s, const std::optional<Tensor>& like, const char* name,
                         const char* like_name) {
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
  };
  check_saved(call.saved_q, call.q, "saved_q", "q");
  check_saved(call.saved_k, call.k, "saved_k", "k");
  if (call.d_freqs) check_frequency_vector(x, *call.d_freqs, "d_freqs");
}

}  // namespace ropegen::call
