// The one place the positional-encoding numbers are defined: inverse
// frequencies after scaling, the attention factor, the xPos bases, the axis
// of each rotary pair, sinusoidal frequencies and ALiBi slopes, in double
// precision.
// Every target (and `rope-gen freqs`) takes its constants from here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ropegen/spec.h"

namespace ropegen {

// What scaling did to one rotary pair, as the formulas below decided it
// (rope-gen explain reports it). llama3: kept (wavelength under the original
// context / high_freq_factor), interpolated (over context / low_freq_factor:
// divided by factor), blended between; yarn: extrapolated (kept),
// interpolated (divided by factor), on the ramp between; longrope: which
// list's factor divided it; linear, ntk, dynamic: scaled.
enum class PairRegime { None, Kept, Interpolated, Blended, Extrapolated, Ramp, Long, Short, Scaled };
const char* to_string(PairRegime);

struct PairScaling {
  PairRegime regime = PairRegime::None;
  // llama3: the smooth factor; yarn: gamma (both the weight of the unscaled
  // frequency: inv = (1 - w) * inv0 / factor + w * inv0, 1 kept, 0
  // interpolated); longrope, linear: the divisor of inv0; ntk, dynamic: the
  // effective base. None: 1.
  double value = 1.0;
};

struct RopeFrequencies {
  std::vector<double> inv_freq;     // rotary_dim / 2, after scaling
  double attention_factor = 1.0;    // multiplies cos and sin (HF attention_scaling)
  std::vector<double> xpos_base;    // per pair s_i (empty without xPos)
  // The sequence length the frequencies were computed for, where it matters
  // (dynamic: max(seq_len, original_max_position); longrope per_call and xPos: seq_len).
  std::optional<int64_t> effective_seq_len;
  bool uses_long_factor = false;    // longrope: which list was applied
  std::vector<PairScaling> pair_scaling;  // per pair (as inv_freq): what scaling did to it
  const char* attention_factor_source = "none";  // the rule (or spec key) attention_factor came from
};

// seq_len is the run-time sequence length (HF: max position id + 1). Specs
// that need it (RopeSpec::needs_seq_len) fall back to HF's init-time value
// when it is absent: dynamic -> original_max_position, longrope -> short.
RopeFrequencies compute_frequencies(const RopeSpec& spec, std::optional<int64_t> seq_len = std::nullopt);

// Multi-axis RoPE: the position axis (index into the positions' trailing
// dim) each rotary pair reads; all 0 without axes.
std::vector<int> pair_axes(const RopeSpec& spec);

// Sinusoidal encoding: base^(-2i/dim) for i in [0, ceil(dim / 2)).
std::vector<double> sinusoidal_frequencies(const RopeSpec& spec);

// The int counterpart of Halide::select, for the templates below (T = int).
inline int select(bool condition, int if_true, int if_false) { return condition ? if_true : if_false; }

// Column c of the sinusoidal table in the spec's table_form: {the pair whose
// frequency it uses, 1 for cos / 0 for sin}. interleaved: (sin, cos) per
// pair; roformer: [sin of every pair | cos of every pair]. The kernels'
// tables and rope_table read it with T = int; a template, so that it also
// maps a column expression (T = Halide::Expr).
template <typename T>
std::pair<T, T> sinusoidal_column(const RopeSpec& spec, const T& c) {
  if (spec.table_form == TableForm::Interleaved) return {c / 2, c % 2};
  const int first_cos = (spec.dim + 1) / 2;
  const T is_cos = select(c >= first_cos, T(1), T(0));
  return {c - is_cos * first_cos, is_cos};
}

// ALiBi head slopes as the ALiBi paper's code (and BLOOM) derive them:
// a geometric sequence for powers of two, interleaved from the next power
// of two otherwise.
std::vector<double> alibi_slopes(int num_heads);

// The xPos exponent for one position: (pos - floor(seq_len / 2)) / scale_base
// (lucidrains centres the scale on the middle of the sequence).
double xpos_power(const RopeSpec& spec, int64_t position, int64_t seq_len);

// Dynamic NTK's base for a run-time length: theta * x^(d/(d-2)) with
// x = factor * max(seq_len, original) / original - (factor - 1). A template so
// kernels evaluate this very formula on a run-time expression (T = Halide::Expr).
template <typename T>
T dynamic_ntk_theta(const RopeSpec& spec, T seq_len) {
  using std::max;
  using std::pow;
  const Scaling& s = spec.scaling;
  const double original = static_cast<double>(s.original_max_position);
  const T len = max(seq_len, T(original));
  const T x = T(s.factor) * len / T(original) - T(s.factor - 1);
  return T(spec.frequency.theta) * pow(x, T(static_cast<double>(spec.rotary_dim) / (spec.rotary_dim - 2)));
}

// YaRN's attention factor on its own (0.1 * mscale * ln(factor) + 1 rules).
double yarn_attention_factor(const Scaling& s);
// LongRoPE's default attention factor: sqrt(1 + ln(factor) / ln(original)).
double longrope_attention_factor(const Scaling& s);

}  // namespace ropegen
