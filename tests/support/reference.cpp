// Float64 reference RoPE. Deliberately naive: one formula per line, no caching,
// no sharing with lowering/. See reference.h and README.md.
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ropegen::ref {
namespace {

using LD = long double;
const LD kPi = 3.141592653589793238462643383279502884L;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("reference_apply: " + what);
}

// 1 / base^(2i/dim) for i in [0, dim/2): the "lang" / HF default inverse frequencies.
std::vector<double> lang_inv_freq(LD base, int dim) {
  std::vector<double> inv(dim / 2);
  for (int i = 0; i < dim / 2; ++i) inv[i] = static_cast<double>(1.0L / std::pow(base, LD(2 * i) / dim));
  return inv;
}

// Un-scaled frequencies of the spec's frequency scheme (lucidrains RotaryEmbedding.__init__).
std::vector<double> scheme_inv_freq(const Frequency& f, int dim) {
  const int n = dim / 2;
  std::vector<double> inv(n);
  switch (f.scheme) {
    case FrequencyScheme::Lang: return lang_inv_freq(f.theta, dim);
    case FrequencyScheme::Pixel:  // torch.linspace(1, max_freq/2, n) * pi
      for (int i = 0; i < n; ++i) {
        LD step = n > 1 ? (LD(f.max_freq) / 2 - 1) / (n - 1) : 0;
        inv[i] = static_cast<double>((1 + i * step) * kPi);
      }
      return inv;
    case FrequencyScheme::Constant: return std::vector<double>(n, f.value);
    case FrequencyScheme::Custom:
      if (static_cast<int>(f.values.size()) != n) throw std::invalid_argument("custom freqs: need rotary_dim/2 values");
      return f.values;
  }
  return inv;
}

// HF _compute_yarn_parameters.get_mscale
LD yarn_get_mscale(LD scale, LD mscale = 1) { return scale <= 1 ? 1.0L : 0.1L * mscale * std::log(scale) + 1.0L; }

void yarn(const RopeSpec& spec, Freqs& out) {
  const Scaling& sc = spec.scaling;
  const int dim = spec.rotary_dim;
  const LD base = spec.frequency.theta, factor = sc.factor, omp = LD(sc.original_max_position);

  if (sc.attention_factor) {
    out.attention_factor = *sc.attention_factor;
  } else if (sc.mscale && sc.mscale_all_dim && *sc.mscale != 0 && *sc.mscale_all_dim != 0) {  // python truthiness
    out.attention_factor = static_cast<double>(yarn_get_mscale(factor, *sc.mscale) / yarn_get_mscale(factor, *sc.mscale_all_dim));
  } else {
    out.attention_factor = static_cast<double>(yarn_get_mscale(factor));
  }
  const LD beta_fast = sc.beta_fast != 0 ? sc.beta_fast : 32;  // HF: get("beta_fast") or 32
  const LD beta_slow = sc.beta_slow != 0 ? sc.beta_slow : 1;

  auto find_correction_dim = [&](LD num_rotations) {
    return (dim * std::log(omp / (num_rotations * 2 * kPi))) / (2 * std::log(base));
  };
  LD low = find_correction_dim(beta_fast), high = find_correction_dim(beta_slow);
  if (sc.truncate) { low = std::floor(low); high = std::ceil(high); }
  low = std::max(low, LD(0));
  high = std::min(high, LD(dim - 1));
  if (low == high) high += 0.001L;  // linear_ramp_factor: prevent singularity

  out.inv_freq.resize(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    LD pos_freq = std::pow(base, LD(2 * i) / dim);
    LD extrapolation = 1 / pos_freq, interpolation = 1 / (factor * pos_freq);
    LD ramp = std::clamp((LD(i) - low) / (high - low), LD(0), LD(1));
    LD extrapolation_factor = 1 - ramp;
    out.inv_freq[i] = static_cast<double>(interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor);
  }
}

void longrope(const RopeSpec& spec, std::optional<int64_t> seq_len, Freqs& out) {
  const Scaling& sc = spec.scaling;
  const int dim = spec.rotary_dim;
  const LD factor = sc.factor;
  if (sc.attention_factor) out.attention_factor = *sc.attention_factor;
  else if (factor <= 1) out.attention_factor = 1.0;
  else out.attention_factor = static_cast<double>(std::sqrt(1 + std::log(factor) / std::log(LD(sc.original_max_position))));

  bool use_long = sc.policy == LongRopePolicy::Long ||
                  (sc.policy == LongRopePolicy::PerCall && seq_len && *seq_len > sc.original_max_position);
  const std::vector<double>& ext = use_long ? sc.long_factor : sc.short_factor;
  if (static_cast<int>(ext.size()) != dim / 2) throw std::invalid_argument("longrope: factor list needs rotary_dim/2 values");
  out.inv_freq.resize(dim / 2);
  for (int i = 0; i < dim / 2; ++i)
    out.inv_freq[i] = static_cast<double>(1.0L / (LD(ext[i]) * std::pow(LD(spec.frequency.theta), LD(2 * i) / dim)));
}

void llama3(const RopeSpec& spec, Freqs& out) {
  const Scaling& sc = spec.scaling;
  const LD factor = sc.factor, lff = sc.low_freq_factor, hff = sc.high_freq_factor;
  const LD old_context_len = LD(sc.original_max_position);
  const LD low_freq_wavelen = old_context_len / lff, high_freq_wavelen = old_context_len / hff;
  out.inv_freq = lang_inv_freq(spec.frequency.theta, spec.rotary_dim);
  for (double& f : out.inv_freq) {
    LD inv = f, wavelen = 2 * kPi / inv;
    if (wavelen < high_freq_wavelen) continue;  // high frequency: unchanged
    if (wavelen > low_freq_wavelen) { f = static_cast<double>(inv / factor); continue; }  // low: divide
    LD smooth = (old_context_len / wavelen - lff) / (hff - lff);                   // medium: blend
    f = static_cast<double>((1 - smooth) * inv / factor + smooth * inv);
  }
}

}  // namespace

Freqs reference_freqs(const RopeSpec& spec, std::optional<int64_t> seq_len) {
  const Scaling& sc = spec.scaling;
  const int dim = spec.rotary_dim;
  const LD theta = spec.frequency.theta;
  Freqs out;
  switch (sc.type) {
    case ScalingType::None: out.inv_freq = scheme_inv_freq(spec.frequency, dim); break;
    case ScalingType::Linear:
      out.inv_freq = scheme_inv_freq(spec.frequency, dim);
      for (double& f : out.inv_freq) f /= sc.factor;
      break;
    case ScalingType::Ntk:  // lucidrains theta_rescale_factor
      out.inv_freq = lang_inv_freq(theta * std::pow(LD(sc.factor), LD(dim) / (dim - 2)), dim);
      break;
    case ScalingType::Dynamic: {  // HF _compute_dynamic_ntk_parameters
      LD omp = LD(sc.original_max_position);
      LD s = (seq_len && LD(*seq_len) > omp) ? LD(*seq_len) : omp;
      LD factor = sc.factor;
      out.inv_freq = lang_inv_freq(theta * std::pow(factor * s / omp - (factor - 1), LD(dim) / (dim - 2)), dim);
      break;
    }
    case ScalingType::Yarn: yarn(spec, out); break;
    case ScalingType::LongRope: longrope(spec, seq_len, out); break;
    case ScalingType::Llama3: llama3(spec, out); break;
  }
  if (spec.xpos.enabled) {  // lucidrains: (arange(0, dim, 2) + 0.4*dim) / (1.4*dim)
    for (int i = 0; i < dim / 2; ++i) out.xpos_scale.push_back((2.0 * i + 0.4 * dim) / (1.4 * dim));
  }
  return out;
}

Tensor reference_apply(const RopeSpec& spec, const Tensor& x, bool is_key, const Call& call) {
  const int64_t D = spec.head_dim;
  const bool thd = spec.layout == Layout::THD;
  require(x.shape.size() == (thd ? 3u : 4u), "x has the wrong rank for the layout");
  require(x.shape.back() == D, "last dim of x must be head_dim");
  int64_t n = 1;
  for (int64_t s : x.shape) n *= s;
  require(static_cast<int64_t>(x.data.size()) == n, "x.data size does not match x.shape");

  // Token extents: B sequences of S tokens each (thd: T tokens, B from cu_seqlens), H heads.
  int64_t B = 1, S = 0, H = 0;
  switch (spec.layout) {
    case Layout::BSHD: B = x.shape[0]; S = x.shape[1]; H = x.shape[2]; break;
    case Layout::BHSD: B = x.shape[0]; H = x.shape[1]; S = x.shape[2]; break;
    case Layout::SBHD: S = x.shape[0]; B = x.shape[1]; H = x.shape[2]; break;
    case Layout::THD: S = x.shape[0]; H = x.shape[1]; break;  // S = T
  }
  std::vector<int64_t> cu = call.cu_seqlens;
  if (thd && cu.empty()) cu = {0, S};
  if (thd) require(cu.size() >= 2 && cu.front() == 0 && cu.back() == S && std::is_sorted(cu.begin(), cu.end()),
                   "cu_seqlens must be non-decreasing from 0 to T");

  // Flat offset of the D-vector of token (b, s), head h. For thd, s is the token index t and b is unused.
  auto row_offset = [&](int64_t b, int64_t s, int64_t h) -> int64_t {
    switch (spec.layout) {
      case Layout::BSHD: return ((b * S + s) * H + h) * D;
      case Layout::BHSD: return ((b * H + h) * S + s) * D;
      case Layout::SBHD: return ((s * B + b) * H + h) * D;
      case Layout::THD: return (s * H + h) * D;
    }
    return 0;
  };
  // Position of token (b, s).
  auto position = [&](int64_t b, int64_t s) -> LD {
    if (call.positions) {
      const Tensor& p = *call.positions;
      if (p.shape.size() == 1) return p.data.at(s);  // [S] (or thd [T])
      return p.data.at(spec.layout == Layout::SBHD ? s * B + b : b * S + s);
    }
    if (!thd) return LD(call.offset + s);
    int64_t seq = std::upper_bound(cu.begin(), cu.end(), s) - cu.begin() - 1;  // sequence holding token s
    return LD(call.offset + (s - cu[seq]));
  };
  if (call.positions) {
    const auto& ps = call.positions->shape;
    int64_t want0 = spec.layout == Layout::SBHD ? S : B, want1 = spec.layout == Layout::SBHD ? B : S;
    bool ok = (ps.size() == 1 && ps[0] == S) || (!thd && ps.size() == 2 && ps[0] == want0 && ps[1] == want1);
    require(ok, "positions shape does not match the layout's token dims");
    require(static_cast<int64_t>(call.positions->data.size()) == (ps.size() == 1 ? S : B * S), "positions data size");
  }

  // seq_len: given, else max(position) + 1 over the whole call (HF dynamic / longrope update).
  std::optional<int64_t> seq_len = call.seq_len;
  if (!seq_len && S > 0) {
    LD max_pos = position(0, 0);
    for (int64_t b = 0; b < (thd ? 1 : B); ++b)
      for (int64_t s = 0; s < S; ++s) max_pos = std::max(max_pos, position(b, s));
    seq_len = static_cast<int64_t>(std::floor(max_pos)) + 1;
  }
  const Freqs fr = reference_freqs(spec, seq_len);

  Tensor out = x;
  const int off = spec.rotary_offset, rd = spec.rotary_dim;
  for (int64_t b = 0; b < (thd ? 1 : B); ++b)
    for (int64_t s = 0; s < S; ++s) {
      const LD pos = position(b, s);
      for (int64_t h = 0; h < H; ++h) {
        const int64_t row = row_offset(b, s, h);
        for (int i = 0; i < rd / 2; ++i) {
          const int64_t ia = row + (spec.pairing == Pairing::Half ? off + i : off + 2 * i);
          const int64_t ib = row + (spec.pairing == Pairing::Half ? off + i + rd / 2 : off + 2 * i + 1);
          const LD angle = pos * LD(fr.inv_freq[i]);
          LD scale = fr.attention_factor;
          if (spec.xpos.enabled) {  // lucidrains get_scale: power = (t - len(t)//2) / scale_base
            const LD p = (pos - LD(*seq_len / 2)) / LD(spec.xpos.scale_base);
            scale *= std::pow(LD(fr.xpos_scale[i]), is_key ? -p : p);
          }
          const LD c = std::cos(angle) * scale, sn = std::sin(angle) * scale;
          const LD a = x.data[ia], bb = x.data[ib];
          // DeepSeek-V3 style: read in `pairing`, write in `output_pairing`.
          const bool out_half = spec.output_pairing == Pairing::Half;
          const int64_t oa = row + (out_half ? off + i : off + 2 * i);
          const int64_t ob = row + (out_half ? off + i + rd / 2 : off + 2 * i + 1);
          out.data[oa] = static_cast<double>(a * c - bb * sn);
          out.data[ob] = static_cast<double>(bb * c + a * sn);
        }
      }
    }
  return out;
}

}  // namespace ropegen::ref
