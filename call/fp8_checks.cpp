// fp8 codes: the scales they divide by (fp8 KV caches: k_scale, v_scale, as
// vLLM's; output_dtype fp8: q_scale, k_scale), and fp8 outputs' out-of-place
// forward calls. Other specs take no scale.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <cmath>
#include <string>
#include <vector>

#include "call/checks.h"

namespace ropegen::call {
namespace {

// What a scale's codes are written into in this spec ("the k cache",
// "out_q", ...), or nullptr when the spec writes none.
const char* scaled(const CheckContext& x, Arg a) {
  const bool fp8_cache = has_kv_cache(x.c) && kv_fp8_name(x.c), fp8_output = has_fp8_output(x.c);
  switch (a) {
    case Arg::QScale: return fp8_output ? "out_q" : nullptr;
    case Arg::KScale:
      return fp8_cache && fp8_output ? "the k cache and out_k"
             : fp8_cache             ? "the k cache"
             : fp8_output            ? "out_k"
                                     : nullptr;
    default: return fp8_cache ? "the v cache" : nullptr;
  }
}

// Why a spec that writes no codes for a scale does not take it.
std::string why_not(const CheckContext& x, Arg a, const char* name) {
  if (a == Arg::QScale)
    return fmt::format(
        "{} is for specs with output_dtype fp8_e4m3 | fp8_e5m2; this spec's outputs are {}: leave {} "
        "out",
        name, to_string(element_type(x.c)), name);
  const char* what = a == Arg::KScale ? "fp8 KV caches (and output_dtype fp8)" : "fp8 KV caches";
  if (!has_kv_cache(x.c)) return fmt::format("{} is for {}; this spec has no kv_cache section", name, what);
  return fmt::format("{} is for {}; the spec's kv_cache dtype {} stores values as they are: leave {} out", name, what,
                     to_string(kv_element_type(x.c)), name);
}

// output_quant's scales: q's layout with head_dim / group in the last dim,
// for q alone.
void check_out_scales(CheckContext& x) {
  const std::optional<Tensor>& s = x.call.out_scales;
  if (!x.c.output_quant_group) {
    if (s) x.fail("out_scales", "out_scales is for specs with `output_quant` (per-group scales of fp8 outputs)");
    return;
  }
  if (x.call.k) x.fail("k", "this spec's output_quant quantizes q alone (DeepSeek-V4's attention output): leave k out");
  if (!s) {
    x.fail("out_scales", fmt::format("the spec has `output_quant: {{group: {}}}`: pass out_scales, float32 shaped as "
                                     "q with head_dim / group = {} in the last dim",
                                     x.c.output_quant_group, x.c.row_dim / x.c.output_quant_group));
    return;
  }
  std::vector<int64_t> want(x.q.shape.begin(), x.q.shape.begin() + x.q.rank);
  want.back() = x.c.row_dim / x.c.output_quant_group;
  if (std::vector<int64_t>(s->shape.begin(), s->shape.begin() + s->rank) != want)
    x.fail("out_scales", fmt::format("out_scales has shape {} but must be q's with head_dim / group = {} in the last "
                                     "dim: ({})",
                                     shape_str(*s), want.back(), fmt::join(want, ", ")));
}

}  // namespace

void check_scales(CheckContext& x) {
  for (auto [a, scale] : {std::pair{Arg::QScale, &x.call.q_scale}, std::pair{Arg::KScale, &x.call.k_scale},
                          std::pair{Arg::VScale, &x.call.v_scale}}) {
    if (!*scale) continue;
    const char* name = abi::info(a).name;
    const float s = **scale;
    const char* into = scaled(x, a);
    const bool cache = a == Arg::VScale || (a == Arg::KScale && has_kv_cache(x.c) && kv_fp8_name(x.c));
    if (!into) x.fail(name, why_not(x, a, name));
    else if (!std::isfinite(s) || !(s > 0))
      x.fail(name, fmt::format("{} ({}) must be finite and > 0: {} holds the {} codes of x / {}", name, s, into,
                               cache ? kv_fp8_name(x.c) : output_fp8_name(x.c), name));
    else if (a == Arg::VScale && !x.call.v)
      x.fail(name,
             "v_scale is given without v: it scales v's rows in v_cache (pass v and "
             "v_cache, or leave v_scale out)");
  }
  check_out_scales(x);  // (refused by every spec without output_quant, fp8 or not)
}

// fp8 outputs are codes in uint8 tensors of their own: q and k keep their
// dtype, so a call writes out_q (and out_k for a k it rotates); backward is
// the inverse rotation (DeepSeek-V4's attention output), but not through a
// norm or into run-time frequencies' gradient.
void check_fp8_outputs(CheckContext& x) {
  if (!has_fp8_output(x.c)) return;
  const char* format = output_fp8_name(x.c);
  if (x.call.backward && (has_qk_norm(x.c) || x.c.runtime_frequencies)) {
    x.fail("backward", fmt::format("a spec with output_dtype {} and {} has no backward kernel: its outputs are codes "
                                   "(the gradient is the same spec's without output_dtype)",
                                   format, has_qk_norm(x.c) ? "qk_norm" : "run-time frequencies"));
    return;
  }
  if (!x.call.out_q)
    x.fail("out_q", fmt::format("the spec's output_dtype is {}: pass out_q, a uint8 tensor shaped like q for the "
                                "codes (q keeps its dtype; not in place)",
                                format));
  if (x.call.k && !x.call.out_k && !has_kv_cache(x.c))
    x.fail("out_k", fmt::format("the spec's output_dtype is {}: pass out_k, a uint8 tensor shaped like k for the "
                                "codes (k keeps its dtype; not in place)",
                                format));
}

}  // namespace ropegen::call
