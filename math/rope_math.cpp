// Formulas follow Hugging Face transformers' modeling_rope_utils.py and
// lucidrains' rotary-embedding-torch (see tests/golden/SEMANTICS.md); they are
// evaluated in double precision, where the peers use float32.
#include "ropegen/rope_math.h"

#include <algorithm>
#include <cmath>

namespace ropegen {
namespace {

constexpr double kPi = 3.14159265358979323846;

// theta^(-2i/d) for i in [0, d/2).
std::vector<double> lang_frequencies(double theta, int rotary_dim) {
  std::vector<double> f(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) f[i] = std::pow(theta, -2.0 * i / rotary_dim);
  return f;
}

// theta * x^(d/(d-2)): NTK-aware base change (lucidrains theta_rescale_factor).
double rescaled_theta(double theta, double x, int rotary_dim) {
  return theta * std::pow(x, static_cast<double>(rotary_dim) / (rotary_dim - 2));
}

std::vector<double> base_frequencies(const RopeSpec& spec, double theta) {
  const Frequency& f = spec.frequency;
  const int n = spec.num_pairs();
  switch (f.scheme) {
    case FrequencyScheme::Lang: return lang_frequencies(theta, spec.rotary_dim);
    case FrequencyScheme::Pixel: {
      // pi * linspace(1, max_freq / 2, n)
      std::vector<double> out(n);
      const double last = f.max_freq / 2;
      for (int i = 0; i < n; ++i) out[i] = kPi * (n == 1 ? 1.0 : 1.0 + (last - 1.0) * i / (n - 1));
      return out;
    }
    case FrequencyScheme::Constant: return std::vector<double>(n, f.value);
    case FrequencyScheme::Custom: return f.values;
    case FrequencyScheme::Runtime: return {};  // given at call time
    case FrequencyScheme::Table: return {};    // cos and sin given at call time
  }
  return {};
}

double mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// YaRN: blend interpolated (inv_freq / factor) and extrapolated frequencies
// with a linear ramp between the correction dims of beta_fast and beta_slow.
std::vector<double> yarn_frequencies(const RopeSpec& spec, std::vector<PairScaling>& regimes) {
  const Scaling& s = spec.scaling;
  const double d = spec.rotary_dim;
  const double theta = spec.frequency.theta;
  const auto correction_dim = [&](double rotations) {
    return d * std::log(s.original_max_position / (rotations * 2 * kPi)) / (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast);
  double high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, d - 1);
  if (low == high) high += 0.001;  // as HF: avoids a zero-width ramp

  std::vector<double> f = lang_frequencies(theta, spec.rotary_dim);
  for (size_t i = 0; i < f.size(); ++i) {
    // HF ramps over the pair index with bounds computed in dim units.
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    f[i] = f[i] / s.factor * (1.0 - extrapolation) + f[i] * extrapolation;
    const PairRegime regime = ramp == 0 ? PairRegime::Extrapolated : ramp == 1 ? PairRegime::Interpolated : PairRegime::Ramp;
    regimes.push_back({regime, extrapolation});
  }
  return f;
}

// Llama 3.1: low frequencies divided by factor, high ones kept, a smooth
// blend in between, bands set by wavelength against the original context.
void apply_llama3(std::vector<double>& f, const Scaling& s, std::vector<PairScaling>& regimes) {
  const double context = static_cast<double>(s.original_max_position);
  const double low_freq_wavelen = context / s.low_freq_factor;
  const double high_freq_wavelen = context / s.high_freq_factor;
  for (double& inv : f) {
    const double wavelen = 2 * kPi / inv;
    if (wavelen > low_freq_wavelen) {
      inv /= s.factor;
      regimes.push_back({PairRegime::Interpolated, 0.0});
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth = (context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      inv = (1 - smooth) * inv / s.factor + smooth * inv;
      regimes.push_back({PairRegime::Blended, smooth});
    } else {
      regimes.push_back({PairRegime::Kept, 1.0});
    }
  }
}

struct AttentionFactor {
  double value;
  const char* source;  // the rule that gave it, for rope-gen explain
};

AttentionFactor yarn_attention(const Scaling& s) {
  if (s.attention_factor) return {*s.attention_factor, "spec: scaling.attention_factor"};
  // HF tests both with Python truthiness: a zero counts as absent.
  if (s.mscale.value_or(0) != 0 && s.mscale_all_dim.value_or(0) != 0)
    return {mscale(s.factor, *s.mscale) / mscale(s.factor, *s.mscale_all_dim),
            "yarn: (0.1*mscale*ln(factor)+1) / (0.1*mscale_all_dim*ln(factor)+1)"};
  return {mscale(s.factor, 1.0), s.factor <= 1 ? "yarn: 1 (factor <= 1)" : "yarn: 0.1*ln(factor)+1"};
}

AttentionFactor longrope_attention(const Scaling& s) {
  if (s.attention_factor) return {*s.attention_factor, "spec: scaling.attention_factor"};
  if (s.factor <= 1.0) return {1.0, "longrope: 1 (factor <= 1)"};
  return {std::sqrt(1.0 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position))),
          "longrope: sqrt(1+ln(factor)/ln(original_max_position))"};
}

}  // namespace

double yarn_attention_factor(const Scaling& s) { return yarn_attention(s).value; }

double longrope_attention_factor(const Scaling& s) { return longrope_attention(s).value; }

const char* to_string(PairRegime r) {
  switch (r) {
    case PairRegime::None: return "none";
    case PairRegime::Kept: return "kept";
    case PairRegime::Interpolated: return "interpolated";
    case PairRegime::Blended: return "blended";
    case PairRegime::Extrapolated: return "extrapolated";
    case PairRegime::Ramp: return "ramp";
    case PairRegime::Long: return "long";
    case PairRegime::Short: return "short";
    case PairRegime::Scaled: return "scaled";
  }
  return "none";
}

std::vector<int> pair_axes(const RopeSpec& spec) {
  const Axes& axes = spec.axes;
  std::vector<int> axis(spec.num_pairs(), 0);
  if (!axes.enabled()) return axis;
  if (axes.interleaved) {
    // Qwen3-VL: round robin over the axes while each has pairs left; the
    // rest (the tail) stays on axis 0.
    const int n = axes.count();
    for (int r = 0; r < spec.num_pairs(); ++r)
      if (r % n != 0 && r < n * axes.sections[r % n]) axis[r] = r % n;
    return axis;
  }
  int r = 0;
  for (int a = 0; a < axes.count(); ++a)
    for (int i = 0; i < axes.sections[a]; ++i) axis[r++] = a;
  return axis;
}

std::vector<double> sinusoidal_frequencies(const RopeSpec& spec) {
  std::vector<double> f((spec.dim + 1) / 2);
  for (size_t i = 0; i < f.size(); ++i) f[i] = std::pow(spec.base, -2.0 * static_cast<double>(i) / spec.dim);
  return f;
}

std::vector<double> alibi_slopes(int num_heads) {
  const auto power_of_two_slopes = [](int n) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(n) - 3)));
    std::vector<double> out(n);
    for (int i = 0; i < n; ++i) out[i] = start * std::pow(start, i);
    return out;
  };
  const int closest = 1 << static_cast<int>(std::floor(std::log2(num_heads)));
  std::vector<double> slopes = power_of_two_slopes(closest);
  if (closest == num_heads) return slopes;
  const std::vector<double> finer = alibi_slopes(2 * closest);
  for (int i = 0; static_cast<int>(slopes.size()) < num_heads; i += 2) slopes.push_back(finer[i]);
  return slopes;
}

namespace {

// Each axis restarts its frequency index: the frequencies (and what scaling
// did to them) of a spec whose rotary_dim is the axis's, placed at the
// axis's pairs.
void place_per_axis_frequencies(const RopeSpec& spec, std::optional<int64_t> seq_len, RopeFrequencies& out) {
  const std::vector<int> axis = pair_axes(spec);
  std::vector<RopeFrequencies> sets;
  for (int pairs : spec.axes.sections) {
    RopeSpec one = spec;
    one.axes = {};
    one.rotary_dim = 2 * pairs;
    sets.push_back(compute_frequencies(one, seq_len));
  }
  out.inv_freq.resize(axis.size());
  out.pair_scaling.resize(axis.size());
  std::vector<size_t> next(sets.size(), 0);
  for (size_t r = 0; r < axis.size(); ++r) {
    const size_t i = next[axis[r]]++;
    out.inv_freq[r] = sets[axis[r]].inv_freq[i];
    out.pair_scaling[r] = sets[axis[r]].pair_scaling[i];
  }
}

}  // namespace

RopeFrequencies compute_frequencies(const RopeSpec& spec, std::optional<int64_t> seq_len) {
  const Scaling& s = spec.scaling;
  const double theta = spec.frequency.theta;
  RopeFrequencies out;
  // The scalings that change every pair alike: a regime and value for all.
  const auto all_pairs = [&out](PairRegime regime, double value) {
    out.pair_scaling.assign(out.inv_freq.size(), {regime, value});
  };
  switch (s.type) {
    case ScalingType::None:
      out.inv_freq = base_frequencies(spec, theta);
      all_pairs(PairRegime::None, 1.0);
      break;
    case ScalingType::Linear:
      out.inv_freq = base_frequencies(spec, theta);
      for (double& f : out.inv_freq) f /= s.factor;
      all_pairs(PairRegime::Scaled, s.factor);
      break;
    case ScalingType::Ntk: {
      const double base = rescaled_theta(theta, s.factor, spec.rotary_dim);
      out.inv_freq = base_frequencies(spec, base);
      all_pairs(PairRegime::Scaled, base);
      break;
    }
    case ScalingType::Dynamic: {
      const int64_t len = std::max(seq_len.value_or(0), s.original_max_position);
      const double base = dynamic_ntk_theta(spec, static_cast<double>(len));
      out.inv_freq = base_frequencies(spec, base);
      out.effective_seq_len = len;
      all_pairs(PairRegime::Scaled, base);
      break;
    }
    case ScalingType::Yarn: {
      out.inv_freq = yarn_frequencies(spec, out.pair_scaling);
      const AttentionFactor a = yarn_attention(s);
      out.attention_factor = a.value, out.attention_factor_source = a.source;
      break;
    }
    case ScalingType::LongRope: {
      out.uses_long_factor = s.policy == LongRopePolicy::Long ||
                             (s.policy == LongRopePolicy::PerCall && seq_len && *seq_len > s.original_max_position);
      const std::vector<double>& ext = out.uses_long_factor ? s.long_factor : s.short_factor;
      out.inv_freq = base_frequencies(spec, theta);
      for (size_t i = 0; i < out.inv_freq.size(); ++i) {
        out.inv_freq[i] /= ext[i];
        out.pair_scaling.push_back({out.uses_long_factor ? PairRegime::Long : PairRegime::Short, ext[i]});
      }
      const AttentionFactor a = longrope_attention(s);
      out.attention_factor = a.value, out.attention_factor_source = a.source;
      if (s.policy == LongRopePolicy::PerCall) out.effective_seq_len = seq_len;
      break;
    }
    case ScalingType::Llama3:
      out.inv_freq = base_frequencies(spec, theta);
      apply_llama3(out.inv_freq, s, out.pair_scaling);
      break;
  }
  if (spec.axes.per_axis_frequencies) place_per_axis_frequencies(spec, seq_len, out);
  if (spec.xpos.enabled) {
    const double d = spec.rotary_dim;
    for (int i = 0; i < spec.num_pairs(); ++i) out.xpos_base.push_back((2.0 * i + 0.4 * d) / (1.4 * d));
    if (seq_len) out.effective_seq_len = seq_len;
  }
  return out;
}

double xpos_power(const RopeSpec& spec, int64_t position, int64_t seq_len) {
  return static_cast<double>(position - seq_len / 2) / spec.xpos.scale_base;
}

}  // namespace ropegen
