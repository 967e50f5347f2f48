// The validated, normalised spec: what every later stage consumes. One
// struct for every encoding (RoPE and the additive/bias ones); the fields an
// encoding does not use keep their defaults. A RopeSpec only ever comes out
// of ropegen::load_spec / parse_spec, so all defaults are filled and every
// invariant of the spec reference (docs/spec.md) holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ropegen/position_limits.h"  // kMaxPosition: the largest position a spec must handle

namespace ropegen {

// The largest frequency, in radians per position: the kernels count the
// quarter turns of position * inv_freq in an int64, and 2^53 * 2^10 = 2^63.
constexpr double kMaxInvFreq = 1024;

enum class Encoding { Rope, Sinusoidal, Learned, Alibi };
enum class Pairing { Half, Interleaved };
// rope: bshd, bhsd, sbhd, thd. sinusoidal, learned: bsd, sbd, td (packed).
// alibi has none of its own: scores are always [B, H, Sq, Sk].
enum class Layout { BSHD, BHSD, SBHD, THD, BSD, SBD, TD };
enum class DType { F32, F16, BF16 };
// runtime: inv_freq [rotary_dim / 2] is a tensor passed at call time.
// table: no frequencies at all; cos and sin (times any attention factor)
// are read from the cos_sin_cache [max_pos, rotary_dim] passed at call time.
enum class FrequencyScheme { Lang, Pixel, Constant, Custom, Runtime, Table };
enum class ScalingType { None, Linear, Ntk, Dynamic, Yarn, LongRope, Llama3 };
enum class LongRopePolicy { PerCall, Long, Short };
enum class PositionsMode { Implicit, Explicit };
// sinusoidal: interleaved = PE[p, 2i] = sin, PE[p, 2i+1] = cos ("Attention Is
// All You Need"); roformer = [sin of every pair | cos of every pair].
enum class TableForm { Interleaved, Roformer };
// alibi: symmetric -m|i-j|, causal -m(i-j) for j <= i, bloom +m*j.
enum class AlibiForm { Symmetric, Causal, Bloom };
// Fused KV-cache append: where rotated k (and v) go. paged_nhd [pages,
// page_size, Hk, D], paged_hnd [pages, Hk, page_size, D] (FlashInfer's
// kv_layout NHD / HND), contiguous [num_slots, Hk, D] (vLLM's slot_mapping).
enum class KvLayout { PagedNhd, PagedHnd, Contiguous };
// The cache's element type; fp8 formats are stored as uint8 (per-tensor scale).
// Stored dtypes with fp8 codes (uint8): KV caches and rope outputs.
enum class KvDType { F32, F16, BF16, Fp8E4m3, Fp8E5m2 };
// Per-head RMSNorm of q and k before the rotation (Qwen3, Gemma 3, OLMo 2):
// rms x * rsqrt(mean(x^2) + eps) * w, rms_one_plus (Gemma) ... * (1 + w).
enum class QkNormType { Rms, RmsOnePlus };
// per_head: a [head_dim] weight for q and one for k with each call; none: no weight.
enum class QkNormWeight { PerHead, None };
enum class QuantScale { Ue8m0, Float32 };
// How a per-tensor scale makes an fp8 code: divide, code = x / scale (the
// scale dequantizes: vLLM's caches, rope-gen's default); multiply, code =
// x * scale (the scale quantizes: FlashInfer's quant_scale).
enum class Fp8Scale { Divide, Multiply };

struct Frequency {
  FrequencyScheme scheme = FrequencyScheme::Lang;
  double theta = 10000.0;           // lang
  double max_freq = 10.0;           // pixel
  double value = 1.0;               // constant
  std::vector<double> values;       // custom: rotary_dim / 2 entries
};

struct Scaling {
  ScalingType type = ScalingType::None;
  double factor = 1.0;
  int64_t original_max_position = 0;       // dynamic, yarn, longrope, llama3
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  bool truncate = true;
  // yarn, longrope: overrides the derived attention factor
  std::optional<double> attention_factor;
  // longrope
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  LongRopePolicy policy = LongRopePolicy::PerCall;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
};

struct XPos {
  bool enabled = false;
  double scale_base = 512.0;
};

// Multi-axis RoPE (2D vision, M-RoPE): rotary pairs split among position
// axes; positions then carry a trailing axis dim. Empty sections: 1-D.
struct Axes {
  std::vector<int> sections;         // pairs per axis, in the positions' axis order; sum = rotary_dim / 2
  bool interleaved = false;          // Qwen3-VL round robin instead of contiguous sections
  bool per_axis_frequencies = false; // each axis restarts its frequency index over its own pairs
  int count() const { return static_cast<int>(sections.size()); }
  bool enabled() const { return !sections.empty(); }
};

// rope, thd only: k (rotated) and v are written into a KV cache in the same
// pass (call tensors v, k_cache, v_cache and the page table or slot mapping).
struct KvCache {
  bool enabled = false;
  KvLayout layout = KvLayout::PagedNhd;
  int page_size = 16;         // paged layouts; 1 for contiguous
  KvDType dtype = KvDType::F32;  // default: the spec's dtype
  // fp8 caches hold codes of x / scale, the per-tensor k_scale and v_scale
  // of each call (`scale: per_tensor`, the one scaling there is).
  bool is_fp8() const { return dtype == KvDType::Fp8E4m3 || dtype == KvDType::Fp8E5m2; }
  // A float cache's dtype as a tensor dtype (fp8 caches: float32, the math's).
  DType float_dtype() const { return dtype == KvDType::F16 ? DType::F16 : dtype == KvDType::BF16 ? DType::BF16 : DType::F32; }
};

// rope only: q and k normalised per head (over all head_dim dims, the
// rotated and the others) before the rotation; dims outside the rotary
// range come out normalised, so the kernel writes the whole row.
struct QkNorm {
  bool enabled = false;
  QkNormType type = QkNormType::Rms;
  double eps = 1e-6;  // > 0, a float32 normal number
  QkNormWeight weight = QkNormWeight::PerHead;
  bool has_weight() const { return enabled && weight == QkNormWeight::PerHead; }
};

// rope with fp8 outputs, q alone: each group of `group` consecutive dims of
// a row quantized with its own scale (DeepSeek-V4's attention output):
// scale = max(absmax, 1e-10) x float32(1 / format max), ue8m0 rounded up to
// a power of two; codes of x / scale; the scales in out_scales.
struct OutputQuant {
  bool enabled = false;
  int group = 128;  // divides head_dim
  QuantScale scale = QuantScale::Ue8m0;
};

struct RopeSpec {
  std::string name;
  Encoding encoding = Encoding::Rope;
  int head_dim = 0;
  int rotary_dim = 0;       // even, 2..head_dim - rotary_offset
  int rotary_offset = 0;    // first rotated dim
  Pairing pairing = Pairing::Half;
  // Where the rotated members are written; differs from `pairing` only for
  // DeepSeek-V3 (HF rope_interleave: read (2i, 2i+1), write (i, i + d/2)).
  Pairing output_pairing = Pairing::Half;
  Layout layout = Layout::BSHD;
  DType dtype = DType::F32;
  Frequency frequency;
  Scaling scaling;
  XPos xpos;
  PositionsMode positions = PositionsMode::Implicit;
  Axes axes;                // rope only
  KvCache kv_cache;         // rope only
  QkNorm qk_norm;           // rope only
  // rope only: what out_q and out_k hold: the spec's dtype (the default),
  // or fp8 codes (uint8, fp8_e4m3 | fp8_e5m2) of x / q_scale and x / k_scale,
  // the call's scales, as FP8 attention takes q. fp8 outputs are written as
  // whole rows (the dims outside the rotary range scaled and cast too), out
  // of place, forward only.
  KvDType output_dtype = KvDType::F32;
  OutputQuant output_quant;  // rope with fp8 outputs only
  // rope with fp8 outputs or an fp8 kv_cache: how q_scale, k_scale and
  // v_scale make the codes (output_quant's own scales always divide).
  Fp8Scale fp8_scale = Fp8Scale::Divide;

  // sinusoidal, learned: the model dim of x's rows.
  int dim = 0;
  double base = 10000.0;    // sinusoidal
  TableForm table_form = TableForm::Interleaved;
  // alibi
  int num_heads = 0;
  AlibiForm alibi_form = AlibiForm::Symmetric;

  int num_pairs() const { return rotary_dim / 2; }
  // Partial rotary RoPE: dims outside the rotary range are copied out of
  // place (with qk_norm the kernel writes them itself, normalised).
  bool has_pass_through() const { return encoding == Encoding::Rope && rotary_dim < head_dim && !writes_whole_rows(); }
  bool has_fp8_output() const {
    return encoding == Encoding::Rope && (output_dtype == KvDType::Fp8E4m3 || output_dtype == KvDType::Fp8E5m2);
  }
  // Whether the kernel writes out_q and out_k whole (every head_dim dim),
  // not only the rotary view.
  bool writes_whole_rows() const { return encoding == Encoding::Rope && (qk_norm.enabled || has_fp8_output()); }
  // Whether the frequencies depend on the run-time sequence length.
  bool needs_seq_len() const {
    return scaling.type == ScalingType::Dynamic || xpos.enabled ||
           (scaling.type == ScalingType::LongRope && scaling.policy == LongRopePolicy::PerCall);
  }
};

// Spellings used in spec files, the normalised form and manifests.
const char* to_string(Encoding);
const char* to_string(Pairing);
const char* to_string(Layout);
const char* to_string(DType);
const char* to_string(FrequencyScheme);
const char* to_string(ScalingType);
const char* to_string(LongRopePolicy);
const char* to_string(PositionsMode);
const char* to_string(TableForm);
const char* to_string(AlibiForm);
const char* to_string(KvLayout);
const char* to_string(KvDType);
const char* to_string(QkNormType);
const char* to_string(QkNormWeight);
const char* to_string(QuantScale);
const char* to_string(Fp8Scale);

// The other way: "bhsd" -> Layout::BHSD; nullopt for a name no spec may use.
std::optional<Layout> layout_named(const std::string& name);
std::optional<DType> dtype_named(const std::string& name);

// The dims of a tensor in a layout, for messages and docs: "[B, S, H, D]".
const char* layout_dims(Layout);

}  // namespace ropegen
