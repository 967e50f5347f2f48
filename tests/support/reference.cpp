// Float64 reference of the positional encodings (RoPE, sinusoidal, learned,
// ALiBi). Deliberately naive: one formula per line, no caching, no sharing
// with lowering/. See reference.h and README.md.
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
  if (!ok) throw std::invalid_argument("reference: " + what);
}

// 1 / base^(2i/dim) for i in [0, dim/2): the "lang" / HF default inverse frequencies.
std::vector<double> lang_inv_freq(LD base, int dim) {
  std::vector<double> inv(dim / 2);
  for (int i = 0; i < dim / 2; ++i) inv[i] = static_cast<double>(1.0L / std::pow(base, LD(2 * i) / dim));
  return inv;
}

// Un-scaled frequencies of the spec's frequency scheme (lucidrains RotaryEmbedding.__init__);
// runtime: the call's values (lucidrains learned_freq=True: the nn.Parameter as it stands).
std::vector<double> scheme_inv_freq(const Frequency& f, int dim, const std::vector<double>& runtime) {
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
    case FrequencyScheme::Runtime:
      if (static_cast<int>(runtime.size()) != n) throw std::invalid_argument("runtime freqs: need rotary_dim/2 values");
      return runtime;
    case FrequencyScheme::Table:  // no frequencies: cos and sin come from the call's cache (for_each_pair)
      return inv;
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

// The frequencies of the spec's scheme and scaling over its rotary_dim, axes aside.
Freqs one_axis_freqs(const RopeSpec& spec, std::optional<int64_t> seq_len,
                     const std::vector<double>& runtime_inv_freq) {
  const Scaling& sc = spec.scaling;
  const int dim = spec.rotary_dim;
  const LD theta = spec.frequency.theta;
  Freqs out;
  switch (sc.type) {
    case ScalingType::None: out.inv_freq = scheme_inv_freq(spec.frequency, dim, runtime_inv_freq); break;
    case ScalingType::Linear:
      out.inv_freq = scheme_inv_freq(spec.frequency, dim, runtime_inv_freq);
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

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Where the tokens of x are: B sequences of S tokens (packed layouts: one run
// of T tokens split by cu_seqlens), each holding H rows of D features (H = 1
// for the row layouts), and the positions of those tokens.
class TokenGrid {
 public:
  TokenGrid(const RopeSpec& spec, const Tensor& x, const Call& call, int64_t row_dim)
      : layout_(spec.layout), call_(call), n_axes_(spec.axes.enabled() ? spec.axes.count() : 1),
        multi_axis_(spec.axes.enabled()) {
    const auto& sh = x.shape;
    require(sh.size() == static_cast<size_t>(rank()) && sh.back() == row_dim,
            "x has the wrong rank for the layout, or its last dim is not the spec's");
    require(static_cast<int64_t>(x.data.size()) == elements(sh), "x.data size does not match x.shape");
    switch (layout_) {
      case Layout::BSHD: B = sh[0]; S = sh[1]; H = sh[2]; break;
      case Layout::BHSD: B = sh[0]; H = sh[1]; S = sh[2]; break;
      case Layout::SBHD: S = sh[0]; B = sh[1]; H = sh[2]; break;
      case Layout::THD: S = sh[0]; H = sh[1]; break;  // S = T
      case Layout::BSD: B = sh[0]; S = sh[1]; break;
      case Layout::SBD: S = sh[0]; B = sh[1]; break;
      case Layout::TD: S = sh[0]; break;
    }
    D = row_dim;
    cu_ = call.cu_seqlens.empty() ? std::vector<int64_t>{0, S} : call.cu_seqlens;
    require(cu_.size() >= 2 && cu_.front() == 0 && cu_.back() == S && std::is_sorted(cu_.begin(), cu_.end()),
            "cu_seqlens must be non-decreasing from 0 to T");
    if (call.positions) check_positions(*call.positions);
  }

  int64_t B = 1, S = 0, H = 1, D = 0;
  bool packed() const { return layout_ == Layout::THD || layout_ == Layout::TD; }
  int64_t batches() const { return packed() ? 1 : B; }

  // Flat offset of the D-vector of token (b, s), row h. Packed: s is the token index t, b is 0.
  int64_t row(int64_t b, int64_t s, int64_t h) const {
    switch (layout_) {
      case Layout::BSHD: case Layout::BSD: return ((b * S + s) * H + h) * D;
      case Layout::BHSD: return ((b * H + h) * S + s) * D;
      case Layout::SBHD: case Layout::SBD: return ((s * B + b) * H + h) * D;
      case Layout::THD: case Layout::TD: return (s * H + h) * D;
    }
    return 0;
  }

  // Position of token (b, s) on position axis a.
  LD position(int64_t b, int64_t s, int a) const {
    if (!call_.positions) {
      if (!packed()) return LD(call_.offset + s);
      const int64_t seq = std::upper_bound(cu_.begin(), cu_.end(), s) - cu_.begin() - 1;  // sequence holding token s
      return LD(call_.offset + (s - cu_[seq]));
    }
    const Tensor& p = *call_.positions;
    const bool shared = p.shape.size() == (multi_axis_ ? 2u : 1u);  // [S] (or packed [T]), per axis
    const int64_t token = shared ? s : (seq_first() ? s * B + b : b * S + s);
    return p.data.at(token * n_axes_ + a);
  }

  // seq_len as HF derives it: max(position) + 1 over the whole call.
  int64_t max_position_plus_one() const {
    LD max_pos = position(0, 0, 0);
    for (int64_t b = 0; b < batches(); ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int a = 0; a < n_axes_; ++a) max_pos = std::max(max_pos, position(b, s, a));
    return static_cast<int64_t>(std::floor(max_pos)) + 1;
  }

 private:
  int rank() const {
    switch (layout_) {
      case Layout::BSHD: case Layout::BHSD: case Layout::SBHD: return 4;
      case Layout::THD: case Layout::BSD: case Layout::SBD: return 3;
      case Layout::TD: return 2;
    }
    return 0;
  }
  bool seq_first() const { return layout_ == Layout::SBHD || layout_ == Layout::SBD; }

  void check_positions(const Tensor& p) const {
    std::vector<int64_t> tokens(p.shape.begin(), p.shape.end() - (multi_axis_ && !p.shape.empty() ? 1 : 0));
    if (multi_axis_) require(!p.shape.empty() && p.shape.back() == n_axes_, "positions need a trailing axis dim");
    const std::vector<int64_t> own = seq_first() ? std::vector<int64_t>{S, B} : std::vector<int64_t>{B, S};
    require(tokens == std::vector<int64_t>{S} || (!packed() && tokens == own),
            "positions shape does not match the layout's token dims");
    require(static_cast<int64_t>(p.data.size()) == elements(p.shape), "positions data size");
  }

  Layout layout_;
  const Call& call_;
  std::vector<int64_t> cu_;
  int n_axes_;
  bool multi_axis_;
};

// One rotary pair of one row: where its members are read (pairing) and
// written (output_pairing), its position, cos/sin of its angle and its
// factor (attention factor x xPos scale).
struct PairSite {
  int pair;
  int64_t ia, ib, oa, ob;
  LD pos, c, s, k;
};

int64_t member(const RopeSpec& spec, Pairing pairing, int i, bool second) {
  const int half = spec.rotary_dim / 2;
  if (pairing == Pairing::Half) return spec.rotary_offset + i + (second ? half : 0);
  return spec.rotary_offset + 2 * i + (second ? 1 : 0);
}

// Calls visit(site) for every rotary pair of every row of x; forward, backward
// and the frequency gradient are each one formula on these sites.
template <typename Visit>
void for_each_pair(const RopeSpec& spec, const Tensor& x, bool is_key, const Call& call, Visit&& visit) {
  const TokenGrid g(spec, x, call, spec.head_dim);
  std::optional<int64_t> seq_len = call.seq_len;
  if (!seq_len && g.S > 0) seq_len = g.max_position_plus_one();
  const Freqs fr = reference_freqs(spec, seq_len, call.inv_freq);
  for (int64_t b = 0; b < g.batches(); ++b)
    for (int64_t s = 0; s < g.S; ++s)
      for (int64_t h = 0; h < g.H; ++h) {
        const int64_t row = g.row(b, s, h);
        for (int i = 0; i < spec.rotary_dim / 2; ++i) {
          const LD pos = g.position(b, s, pair_axis(spec.axes, i));
          const LD angle = pos * LD(fr.inv_freq[i]);
          LD k = fr.attention_factor, c = std::cos(angle), sn = std::sin(angle);
          if (spec.frequency.scheme == FrequencyScheme::Table) {  // an engine's cos_sin_cache, row pos: [cos | sin]
            require(call.cos_sin_cache && call.cos_sin_cache->shape.size() == 2 &&
                        call.cos_sin_cache->shape[1] == spec.rotary_dim,
                    "scheme table: cos_sin_cache must be [max_pos, rotary_dim]");
            require(pos >= 0 && pos < call.cos_sin_cache->shape[0], "scheme table: position outside cos_sin_cache");
            const double* row = &call.cos_sin_cache->data[static_cast<int64_t>(pos) * spec.rotary_dim];
            c = row[i], sn = row[spec.rotary_dim / 2 + i], k = 1;  // the cache holds the attention factor
          }
          if (spec.xpos.enabled) {  // lucidrains get_scale: power = (t - len(t)//2) / scale_base
            const LD p = (pos - LD(*seq_len / 2)) / LD(spec.xpos.scale_base);
            k *= std::pow(LD(fr.xpos_scale[i]), is_key ? -p : p);
          }
          visit(PairSite{i, row + member(spec, spec.pairing, i, false), row + member(spec, spec.pairing, i, true),
                         row + member(spec, spec.output_pairing, i, false),
                         row + member(spec, spec.output_pairing, i, true), pos, c, sn, k});
        }
      }
}

// Sinusoidal table entry (p, col): angle(p, i) = p * base^(-2i/dim).
// interleaved: col 2i = sin, 2i+1 = cos ("Attention Is All You Need", XLM);
// roformer: cols [0, ceil(dim/2)) sin of angle col, the rest cos of angle col - ceil(dim/2).
LD sinusoidal_entry(const RopeSpec& spec, LD p, int col) {
  const int sin_cols = (spec.dim + 1) / 2;
  const bool interleaved = spec.table_form == TableForm::Interleaved;
  const int i = interleaved ? col / 2 : (col < sin_cols ? col : col - sin_cols);
  const bool is_sin = interleaved ? col % 2 == 0 : col < sin_cols;
  const LD angle = p * std::pow(LD(spec.base), -LD(2 * i) / spec.dim);
  return is_sin ? std::sin(angle) : std::cos(angle);
}

}  // namespace

int pair_axis(const Axes& axes, int r) {
  const int n = axes.count();
  if (axes.interleaved) {  // Qwen3-VL apply_interleaved_mrope
    for (int a = 1; a < n; ++a)
      if (r % n == a && r < n * axes.sections[a]) return a;
    return 0;
  }
  for (int a = 0; a < n; ++a) {
    if (r < axes.sections[a]) return a;
    r -= axes.sections[a];
  }
  return 0;
}

Freqs reference_freqs(const RopeSpec& spec, std::optional<int64_t> seq_len,
                      const std::vector<double>& runtime_inv_freq) {
  Freqs out = one_axis_freqs(spec, seq_len, runtime_inv_freq);
  if (!spec.axes.per_axis_frequencies || spec.frequency.scheme == FrequencyScheme::Runtime) return out;
  // Each axis's set as if rotary_dim were 2 * sections[a] (lucidrains get_axial_freqs, Qwen2-VL
  // VisionRotaryEmbedding(head_dim/2), seed 002's 2D RoPE); pair r takes the next one of its axis.
  std::vector<int> used(spec.axes.count());
  for (int r = 0; r < spec.rotary_dim / 2; ++r) {
    const int a = pair_axis(spec.axes, r);
    RopeSpec one = spec;
    one.rotary_dim = 2 * spec.axes.sections[a];
    out.inv_freq[r] = one_axis_freqs(one, seq_len, runtime_inv_freq).inv_freq[used[a]++];
  }
  return out;
}

Tensor reference_apply(const RopeSpec& spec, const Tensor& input, bool is_key, const Call& call) {
  const Tensor x =
      spec.qk_norm.enabled ? reference_qk_norm(spec, input, is_key ? call.k_norm_weight : call.q_norm_weight) : input;
  Tensor out = x;
  for_each_pair(spec, x, is_key, call, [&](const PairSite& p) {
    const LD a = x.data[p.ia], b = x.data[p.ib];
    out.data[p.oa] = static_cast<double>((a * p.c - b * p.s) * p.k);
    out.data[p.ob] = static_cast<double>((b * p.c + a * p.s) * p.k);
  });
  return out;
}

Gradients reference_backward(const RopeSpec& spec, const Tensor& grad, const Tensor* saved, bool is_key,
                             const Call& call) {
  if (saved) require(saved->shape == grad.shape, "saved input and gradient differ in shape");
  Gradients out{grad, {}, {}};
  std::vector<LD> d_freq(spec.rotary_dim / 2);
  for_each_pair(spec, grad, is_key, call, [&](const PairSite& p) {
    const LD g0 = grad.data[p.oa], g1 = grad.data[p.ob];
    out.dx.data[p.ia] = static_cast<double>((g0 * p.c + g1 * p.s) * p.k);  // R(angle)^T g
    out.dx.data[p.ib] = static_cast<double>((g1 * p.c - g0 * p.s) * p.k);
    if (!saved || spec.qk_norm.enabled) return;
    const LD a = saved->data[p.ia], b = saved->data[p.ib];
    const LD y0 = a * p.c - b * p.s, y1 = b * p.c + a * p.s;  // d(y0, y1)/d(angle) = (-y1, y0)
    d_freq[p.pair] += p.pos * p.k * (g1 * y0 - g0 * y1);
  });
  if (spec.qk_norm.enabled) {
    require(saved != nullptr, "the backward of qk_norm needs the forward input");
    NormGradients norm =
        reference_qk_norm_backward(spec, *saved, out.dx, is_key ? call.k_norm_weight : call.q_norm_weight);
    out.dx = std::move(norm.dx);
    out.d_norm_weight = std::move(norm.d_weight);
    return out;
  }
  if (saved) out.d_inv_freq.assign(d_freq.begin(), d_freq.end());
  return out;
}

Tensor reference_add_positions(const RopeSpec& spec, const Tensor& x, const Call& call) {
  require(spec.encoding == Encoding::Sinusoidal || spec.encoding == Encoding::Learned,
          "reference_add_positions: sinusoidal or learned specs only");
  const bool learned = spec.encoding == Encoding::Learned;
  if (learned) require(call.table && call.table->shape.size() == 2 && call.table->shape[1] == spec.dim,
                       "learned: the table must be [max_len, dim]");
  const TokenGrid g(spec, x, call, spec.dim);
  Tensor out = x;
  for (int64_t b = 0; b < g.batches(); ++b)
    for (int64_t s = 0; s < g.S; ++s) {
      const LD pos = g.position(b, s, 0);
      if (learned) require(pos >= 0 && pos < call.table->shape[0], "learned: position outside the table");
      const int64_t row = g.row(b, s, 0);
      for (int c = 0; c < spec.dim; ++c) {
        const LD add = learned ? LD(call.table->data[static_cast<int64_t>(pos) * spec.dim + c])
                               : sinusoidal_entry(spec, pos, c);
        out.data[row + c] = static_cast<double>(x.data[row + c] + add);
      }
    }
  return out;
}

std::vector<double> reference_alibi_slopes(int num_heads) {
  // get_slopes_power_of_2(p): start = 2^(-(2^-(log2 p - 3))) = 2^(-8/p), slopes start^(h+1);
  // other counts: those of the power of two p below, then every other slope of 2p.
  int p = 1;
  while (2 * p <= num_heads) p *= 2;
  std::vector<double> slopes;
  const LD start = std::pow(2.0L, -8.0L / p);
  for (int h = 0; h < p; ++h) slopes.push_back(static_cast<double>(std::pow(start, LD(h + 1))));
  if (p < num_heads) {
    const std::vector<double> finer = reference_alibi_slopes(2 * p);
    for (int h = 0; h < num_heads - p; ++h) slopes.push_back(finer[2 * h]);
  }
  return slopes;
}

Tensor reference_alibi(const RopeSpec& spec, const Tensor& scores, int64_t offset) {
  require(spec.encoding == Encoding::Alibi, "reference_alibi: alibi specs only");
  require(scores.shape.size() == 4 && scores.shape[1] == spec.num_heads, "scores must be [B, num_heads, Sq, Sk]");
  require(static_cast<int64_t>(scores.data.size()) == elements(scores.shape), "scores data size");
  const std::vector<double> m = reference_alibi_slopes(spec.num_heads);
  const int64_t B = scores.shape[0], H = scores.shape[1], Sq = scores.shape[2], Sk = scores.shape[3];
  Tensor out = scores;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < Sq; ++r)
        for (int64_t j = 0; j < Sk; ++j) {
          const int64_t i = offset + r;
          double& v = out.data[((b * H + h) * Sq + r) * Sk + j];
          switch (spec.alibi_form) {
            case AlibiForm::Symmetric: v -= m[h] * static_cast<double>(std::abs(i - j)); break;
            case AlibiForm::Causal: if (j <= i) v -= m[h] * static_cast<double>(i - j); break;  // j > i: the mask's
            case AlibiForm::Bloom: v += m[h] * static_cast<double>(j); break;                   // HF build_alibi_tensor
          }
        }
  return out;
}

Tensor reference_table(const RopeSpec& spec, const Call& call) {
  require(call.positions.has_value(), "reference_table: positions are required");
  const Tensor& p = *call.positions;
  const int n_axes = spec.axes.enabled() ? spec.axes.count() : 1;
  const int64_t N = p.shape.empty() ? 0 : p.shape[0];
  require(static_cast<int64_t>(p.data.size()) == N * n_axes, "table positions must be [N] or [N, n_axes]");
  if (spec.encoding == Encoding::Sinusoidal) {
    Tensor out{{N, spec.dim}, std::vector<double>(N * spec.dim)};
    for (int64_t n = 0; n < N; ++n)
      for (int c = 0; c < spec.dim; ++c)
        out.data[n * spec.dim + c] = static_cast<double>(sinusoidal_entry(spec, p.data[n], c));
    return out;
  }
  require(spec.encoding == Encoding::Rope, "reference_table: rope or sinusoidal specs only");
  std::optional<int64_t> seq_len = call.seq_len;
  if (!seq_len && N > 0) seq_len = static_cast<int64_t>(*std::max_element(p.data.begin(), p.data.end())) + 1;
  const Freqs fr = reference_freqs(spec, seq_len, call.inv_freq);
  const int half = spec.rotary_dim / 2;
  Tensor out{{N, spec.rotary_dim}, std::vector<double>(N * spec.rotary_dim)};
  for (int64_t n = 0; n < N; ++n)
    for (int i = 0; i < half; ++i) {
      const LD angle = LD(p.data[n * n_axes + pair_axis(spec.axes, i)]) * LD(fr.inv_freq[i]);
      out.data[n * spec.rotary_dim + i] = static_cast<double>(std::cos(angle) * fr.attention_factor);
      out.data[n * spec.rotary_dim + half + i] = static_cast<double>(std::sin(angle) * fr.attention_factor);
    }
  return out;
}

void reference_kv_append(const RopeSpec& spec, const Tensor& rows, const KvIndices& ix, Tensor& cache) {
  require(rows.shape.size() == 3, "kv append: rows must be [T, Hk, Dx]");
  const int64_t T = rows.shape[0], H = rows.shape[1], D = rows.shape[2];
  const KvCache& kv = spec.kv_cache;
  const int64_t ps = kv.page_size;
  for (int64_t t = 0; t < T; ++t) {
    int64_t page = 0, entry = 0;
    if (kv.layout == KvLayout::Contiguous) {
      page = ix.slot_mapping.at(t);
      if (page < 0) continue;
    } else {
      const int64_t b = ix.batch_indices.at(t), p = ix.positions.at(t);
      if (b < 0) continue;
      const int64_t page_iter = ix.kv_indptr.at(b) + p / ps;
      require(page_iter < ix.kv_indptr.at(b + 1), "kv append: position past the request's pages");
      page = ix.kv_indices.at(page_iter), entry = p % ps;
    }
    require(page >= 0 && page < cache.shape[0], "kv append: page or slot outside the cache");
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        int64_t at = 0;
        switch (kv.layout) {
          case KvLayout::PagedNhd: at = ((page * ps + entry) * H + h) * D + d; break;
          case KvLayout::PagedHnd: at = ((page * H + h) * ps + entry) * D + d; break;
          case KvLayout::Contiguous: at = (page * H + h) * D + d; break;
        }
        cache.data.at(at) = rows.data[(t * H + h) * D + d];
      }
  }
}

double fp8_value(KvDType format, uint8_t code) {
  const bool e4m3 = format == KvDType::Fp8E4m3;
  require(e4m3 || format == KvDType::Fp8E5m2, "fp8_value: not an fp8 format");
  const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exponent_max = (1 << (7 - mantissa_bits)) - 1;
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int exponent = (code & 0x7f) >> mantissa_bits, mantissa = code & ((1 << mantissa_bits) - 1);
  if (e4m3 && exponent == exponent_max && mantissa == (1 << mantissa_bits) - 1) return std::nan("");
  if (!e4m3 && exponent == exponent_max) return mantissa == 0 ? sign * INFINITY : std::nan("");
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - mantissa_bits);
  return sign * std::ldexp(1.0 + std::ldexp(mantissa, -mantissa_bits), exponent - bias);
}

double fp8_max(KvDType format) { return format == KvDType::Fp8E4m3 ? 448.0 : 57344.0; }

uint8_t fp8_code(KvDType format, float x, float scale, Fp8Scale rule) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return 0x7f | sign;
  const float q = rule == Fp8Scale::Multiply ? x * scale : x / scale;  // float32, as vLLM and FlashInfer
  const double max = fp8_max(format);
  const double clamped = std::isnan(q) ? q : std::min(std::max(static_cast<double>(q), -max), max);
  int best = -1;
  double best_distance = INFINITY;
  for (int code = 0; code < 256; ++code) {
    const double v = fp8_value(format, static_cast<uint8_t>(code));
    if (!std::isfinite(v)) continue;
    // Zeros: the one with x's sign.
    if (v == 0 && (code & 0x80) != sign) continue;
    const double distance = std::fabs(v - clamped);
    // Ties: the even mantissa (the code's last bit clear).
    if (distance < best_distance || (distance == best_distance && (code & 1) == 0)) best = code, best_distance = distance;
  }
  return static_cast<uint8_t>(best);
}

}  // namespace ropegen::ref
