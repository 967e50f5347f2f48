// The numbers of `rope-gen explain`: everything is read off rope_math (the
// kernels' constants); this file only arranges it per pair and says in words
// what each encoding leaves out.
#include "ropegen/rope_explain.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "lowering/rope_precision.h"
#include "ropegen/position_limits.h"

namespace ropegen {
namespace {

constexpr double kTwoPi = 6.28318530717958647692;

Diagnostic option_error(const char* option, const std::string& message) {
  return Diagnostic{{option, -1, -1}, message, {}};
}

bool extends_context(const Scaling& s) { return s.type != ScalingType::None && s.original_max_position > 0; }

PairExplanation pair_of(int index, double inv_freq, double unscaled, PairScaling scaling, int64_t context) {
  PairExplanation p;
  p.index = index;
  p.inv_freq = inv_freq;
  p.inv_freq_unscaled = unscaled;
  p.wavelength = inv_freq == 0 ? std::numeric_limits<double>::infinity() : kTwoPi / inv_freq;
  p.scaling = scaling;
  p.turns = static_cast<double>(context) * inv_freq / kTwoPi;
  return p;
}

Status measure_into(const lowering::PrecisionInputs& in, bool wanted, Explanation& e) {
  if (!wanted) return {};
  Result<Precision> p = lowering::measure_precision(in);
  if (!p) return p.errors();
  e.precision = std::move(p).value();
  return {};
}

Status explain_rope(const RopeSpec& spec, const ExplainOptions& o, Explanation& e) {
  const RopeFrequencies f = compute_frequencies(spec, o.seq_len);
  RopeSpec unscaled_spec = spec;
  unscaled_spec.scaling = {};
  const std::vector<double> unscaled = compute_frequencies(unscaled_spec).inv_freq;
  e.rotary_dim = spec.rotary_dim;
  e.attention_factor = f.attention_factor;
  e.attention_factor_source = f.attention_factor_source;
  e.seq_len = f.effective_seq_len;
  if (spec.needs_seq_len() && !o.seq_len)
    e.notes.push_back("no --seq-len: frequencies as HF initialises them; pass the run-time length to see its effect");
  if (spec.frequency.scheme == FrequencyScheme::Runtime || spec.frequency.scheme == FrequencyScheme::Table) {
    e.notes.push_back(spec.frequency.scheme == FrequencyScheme::Runtime
                          ? "frequency scheme runtime: inv_freq is given with each call, so there is nothing to list"
                          : "frequency scheme table: cos and sin are read from the call's cos_sin_cache, so there is "
                            "nothing to list");
    return {};
  }
  const std::vector<int> axes = pair_axes(spec);
  for (int i = 0; i < spec.num_pairs(); ++i) {
    e.pairs.push_back(pair_of(i, f.inv_freq[i], unscaled[i], f.pair_scaling[i], e.context));
    if (spec.axes.enabled()) e.pairs.back().axis = axes[i];
  }
  if (spec.xpos.enabled)
    e.notes.push_back("xpos: q and k are also scaled by xpos_base^(+-power); the precision figures are of cos and sin alone");
  lowering::PrecisionInputs in{spec, f.inv_freq, f.attention_factor, *o.max_pos, {}, 0, {}};
  if (spec.xpos.enabled) {
    in.no_kernel_note = "xpos: the kernel's outputs carry the xPos scale, not cos and sin";
  } else if (o.kernel_table) {
    in.kernel_table = o.kernel_table;
    // The seq_len that gives the kernel these very frequencies: HF's
    // init-time ones (dynamic, longrope per_call) at the original context.
    in.kernel_seq_len = o.seq_len.value_or(spec.scaling.original_max_position > 0 ? spec.scaling.original_max_position
                                                                                 : *o.max_pos + 1);
  }
  return measure_into(in, o.precision, e);
}

Status explain_sinusoidal(const RopeSpec& spec, const ExplainOptions& o, Explanation& e) {
  e.rotary_dim = spec.dim;
  const std::vector<double> f = sinusoidal_frequencies(spec);
  std::vector<std::pair<int, int>> columns(f.size(), {-1, -1});
  for (int c = 0; c < spec.dim; ++c) {
    const auto [pair, is_cos] = sinusoidal_column(spec, c);
    (is_cos ? columns[pair].second : columns[pair].first) = c;
  }
  for (size_t i = 0; i < f.size(); ++i) {
    e.pairs.push_back(pair_of(static_cast<int>(i), f[i], f[i], {}, e.context));
    e.pairs.back().columns = columns[i];
  }
  lowering::PrecisionInputs in{spec, f, 1.0, *o.max_pos, o.kernel_table, 0, {}};
  return measure_into(in, o.precision, e);
}

}  // namespace

int64_t default_max_pos(const RopeSpec& spec) {
  const Scaling& s = spec.scaling;
  const int64_t longest = int64_t{1} << 17;
  if (!extends_context(s)) return longest;
  const double extended = std::ceil(static_cast<double>(s.original_max_position) * std::max(s.factor, 1.0));
  const double most = static_cast<double>(kMaxPosition);
  return extended > static_cast<double>(longest) ? static_cast<int64_t>(std::min(extended, most)) : longest;
}

Result<Explanation> explain(const RopeSpec& spec, const ExplainOptions& options) {
  ExplainOptions o = options;
  if (o.max_pos && (*o.max_pos < 1 || *o.max_pos > kMaxPosition))
    return option_error("--max-pos", fmt::format("--max-pos ({}) must be in 1..{}", *o.max_pos, kMaxPositionText));
  if (o.seq_len && *o.seq_len < 1) return option_error("--seq-len", fmt::format("--seq-len ({}) must be >= 1", *o.seq_len));
  if (!o.max_pos) o.max_pos = default_max_pos(spec);

  Explanation e;
  e.name = spec.name;
  e.encoding = spec.encoding;
  e.scaling = spec.scaling.type;
  e.factor = spec.scaling.factor;
  const Scaling& s = spec.scaling;
  if (s.original_max_position > 0) e.original_max_position = s.original_max_position;
  if (extends_context(s) && s.factor > 1)
    e.extended_context = static_cast<int64_t>(std::ceil(static_cast<double>(s.original_max_position) * s.factor));
  e.max_pos = *o.max_pos;
  e.context = e.original_max_position.value_or(*o.max_pos);
  if (!e.original_max_position) e.context_source = "max_pos";
  e.attention_factor_source = "none";
  Status measured;
  switch (spec.encoding) {
    case Encoding::Rope: measured = explain_rope(spec, o, e); break;
    case Encoding::Sinusoidal: measured = explain_sinusoidal(spec, o, e); break;
    case Encoding::Learned:
      e.rotary_dim = spec.dim;
      e.notes.push_back(fmt::format("learned: x + table[position], the table [max_len, {}] being the model's weights "
                                    "(given with each call); rope-gen adds its rows in float32 with one rounding",
                                    spec.dim));
      break;
    case Encoding::Alibi:
      e.alibi_slopes = alibi_slopes(spec.num_heads);
      e.notes.push_back(fmt::format("alibi: scores + slope_h * ({}) per head; no frequencies and no trigonometry",
                                    spec.alibi_form == AlibiForm::Bloom  ? "key position j"
                                    : spec.alibi_form == AlibiForm::Causal ? "-(i - j) for j <= i"
                                                                           : "-|i - j|"));
      break;
  }
  if (!measured) return measured.errors();
  return e;
}

}  // namespace ropegen
