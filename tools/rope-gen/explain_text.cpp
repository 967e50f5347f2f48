#include "explain_text.h"

#include <cmath>

#include <fmt/format.h>

namespace ropegen::cli {
namespace {

std::string headline(const Explanation& e) {
  std::string s = fmt::format("{}: {}", e.name, to_string(e.encoding));
  if (e.encoding == Encoding::Rope)
    s += fmt::format(", {} rotary pairs (rotary_dim {})", e.rotary_dim / 2, e.rotary_dim);
  else if (e.encoding != Encoding::Alibi)
    s += fmt::format(", dim {}", e.rotary_dim);
  if (e.scaling != ScalingType::None) {
    s += fmt::format(", {} scaling, factor {:g}", to_string(e.scaling), e.factor);
    if (e.original_max_position) s += fmt::format(", original context {}", *e.original_max_position);
    if (e.extended_context) s += fmt::format(" (x factor: {})", *e.extended_context);
  }
  if (e.seq_len) s += fmt::format(", frequencies for seq_len {}", *e.seq_len);
  return s + "\n";
}

std::string regime_text(const PairExplanation& p, ScalingType scaling) {
  const PairScaling& s = p.scaling;
  switch (s.regime) {
    case PairRegime::None: return "-";
    case PairRegime::Blended: return fmt::format("blended, smooth {:.4f}", s.value);
    case PairRegime::Ramp: return fmt::format("ramp, gamma {:.4f}", s.value);
    case PairRegime::Long:
    case PairRegime::Short: return fmt::format("{}, factor {:.6g}", to_string(s.regime), s.value);
    case PairRegime::Scaled:
      return scaling == ScalingType::Linear ? fmt::format("scaled, factor {:g}", s.value)
                                            : fmt::format("scaled, base {:.6g}", s.value);
    default: return to_string(s.regime);
  }
}

std::string pair_table(const Explanation& e) {
  if (e.pairs.empty()) return "";
  const bool axes = e.pairs.front().axis.has_value();
  const bool columns = e.pairs.front().columns.has_value();
  const std::string turns = fmt::format("turns in {}", e.context);
  std::string s = fmt::format("\n{:>4}  {}{:<12}  {:<12}  {:>12}  {:>14}  {:<9}  {}\n", "pair", axes ? "axis  " : "",
                              "inv_freq", "unscaled", "wavelength", turns, "full turn", columns ? "columns (sin, cos)" : "regime");
  for (const PairExplanation& p : e.pairs) {
    s += fmt::format("{:>4}  ", p.index);
    if (axes) s += fmt::format("{:>4}  ", *p.axis);
    s += fmt::format("{:<12.6e}  {:<12.6e}  {:>12.6g}  {:>14.6g}  {:<9}  ", p.inv_freq, p.inv_freq_unscaled, p.wavelength,
                     p.turns, p.turns >= 1 ? "yes" : "no");
    if (columns)
      s += p.columns->second < 0 ? fmt::format("{}, -", p.columns->first)
                                 : fmt::format("{}, {}", p.columns->first, p.columns->second);
    else
      s += regime_text(p, e.scaling);
    s += "\n";
  }
  s += fmt::format("(turns: full turns within {} positions, the {})\n", e.context,
                   e.context_source == std::string("max_pos") ? "--max-pos (the spec names no original context)"
                                                               : "original context");
  return s;
}

std::string error_text(double x) { return fmt::format("{:.3e}", x); }

std::string precision_text(const Precision& p, Encoding encoding) {
  std::string s = fmt::format("\nprecision up to position {} ({}), largest |error| against float64 of {}:\n", p.max_pos,
                              p.sampled ? fmt::format("{} positions sampled, per power-of-two bin", p.positions_checked)
                                        : fmt::format("every position 0..{}", p.max_pos),
                              encoding == Encoding::Rope ? "cos and sin x attention factor" : "the PE");
  const TrigErrors& m = p.max_error;
  // Who computes RoPE's tables so (the definitions: ropegen/rope_explain.h).
  const bool rope = encoding == Encoding::Rope;
  s += fmt::format("  {:<58}{}\n", std::string("float32 angle, fl32(p) * fl32(inv_freq)") + (rope ? " (HF)" : ""),
                   error_text(m.f32_angle));
  s += fmt::format("  {:<58}{}\n", std::string("bf16 table from float32 angles") + (rope ? " (vLLM's cache in bf16)" : ""),
                   error_text(m.bf16_table));
  s += fmt::format("  {:<58}{}\n", std::string("f16 table from float32 angles") + (rope ? " (vLLM's cache in f16)" : ""),
                   error_text(m.f16_table));
  s += fmt::format("  {:<58}{}\n", "rope-gen kernel (float32)", m.rope_gen ? error_text(*m.rope_gen) : "- (" + p.rope_gen_note + ")");
  return s;
}

}  // namespace

std::string explanation_text(const Explanation& e) {
  std::string s = headline(e);
  if (e.encoding == Encoding::Rope)
    s += fmt::format("attention factor {:.9g} ({})\n", e.attention_factor, e.attention_factor_source);
  s += pair_table(e);
  if (!e.alibi_slopes.empty()) {
    s += fmt::format("\n{:>4}  {}\n", "head", "slope");
    for (size_t h = 0; h < e.alibi_slopes.size(); ++h) s += fmt::format("{:>4}  {:.9g}\n", h, e.alibi_slopes[h]);
  }
  if (e.precision) s += precision_text(*e.precision, e.encoding);
  if (!e.notes.empty()) s += "\n";
  for (const std::string& note : e.notes) s += "note: " + note + "\n";
  return s;
}

}  // namespace ropegen::cli
