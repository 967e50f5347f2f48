#include "spec_builder.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "computed_values.h"
#include "enums.h"
#include "schema.h"
#include "shown_text.h"
#include "spec_name.h"

namespace ropegen::dsl {
namespace {

constexpr int kMaxHeadDim = 16384;
constexpr int kMaxDim = 1 << 20;
constexpr int kMaxHeads = 65536;
constexpr size_t kMaxAxes = 8;
constexpr int kMaxPageSize = 1 << 16;
// xPos: p = (pos - seq_len / 2) / scale_base; below 1, one position moves the
// exponent by more than 1 and 1 / scale_base may not even be finite.
constexpr double kMinXposScaleBase = 1.0;

class SpecBuilder {
 public:
  SpecBuilder(const YamlDocument& doc, const SpecDefaults& defaults)
      : doc_(doc), root_(doc.root()), defaults_(defaults) {}

  Result<RopeSpec> run() {
    read_name();
    read_enum(root_, "encoding", spec_.encoding);
    if (defaults_.dtype) spec_.dtype = *defaults_.dtype;
    read_enum(root_, "dtype", spec_.dtype);
    switch (spec_.encoding) {
      case Encoding::Rope: read_rope(); break;
      case Encoding::Sinusoidal: read_sinusoidal(); break;
      // learned: positions index rows of the run-time table, so they are explicit by default.
      case Encoding::Learned: read_table_encoding(PositionsMode::Explicit); break;
      case Encoding::Alibi: read_alibi(); break;
    }
    if (errors_.empty()) errors_ = check_computed_values(spec_, doc_);
    if (!errors_.empty()) return errors_;
    return spec_;
  }

 private:
  void error(const YAML::Node& at, std::string message) { errors_.push_back(doc_.error_at(at, std::move(message))); }

  template <typename E>
  void read_enum(const YAML::Node& map, const char* key, E& out) {
    if (const YAML::Node n = map[key]) out = *from_string<E>(as_string(n));
  }

  // The spec's layout, else the caller's default, which must be one of the
  // encoding's (the schema checks the spec's own).
  void read_layout(std::initializer_list<Layout> allowed) {
    if (defaults_.layout && !root_["layout"]) {
      if (std::find(allowed.begin(), allowed.end(), *defaults_.layout) == allowed.end()) {
        std::string names;
        for (Layout l : allowed) names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(l));
        errors_.push_back(doc_.error_at(-1, -1, fmt::format("layout {} (the call's) is not a layout of {} ({})",
                                                             to_string(*defaults_.layout),
                                                             to_string(spec_.encoding), names)));
        return;
      }
      spec_.layout = *defaults_.layout;
    }
    read_enum(root_, "layout", spec_.layout);
  }

  void read_positions() {
    if (defaults_.positions) spec_.positions = *defaults_.positions;
    read_enum(root_, "positions", spec_.positions);
  }

  void read_name() {
    const YAML::Node name = root_["name"];
    spec_.name = as_string(name);
    if (!is_identifier(spec_.name))
      error(name, fmt::format("name `{}` must be an identifier: [a-z_][a-z0-9_]*, at most {} characters "
                              "(it prefixes every emitted symbol and is never a path)",
                              shown(spec_.name), kMaxNameLength));
  }

  void read_rope() {
    read_rope_dims();
    read_frequency();
    read_scaling();
    read_xpos();
    read_axes();
    read_kv_cache();
    read_qk_norm();
    read_output_dtype();
    read_output_quant();
    read_fp8_scale();
  }

  // The rule of the per-tensor fp8 scales; only where fp8 codes are written
  // with them.
  void read_fp8_scale() {
    const YAML::Node n = root_["fp8_scale"];
    if (!n) return;
    read_enum(root_, "fp8_scale", spec_.fp8_scale);
    if (!spec_.has_fp8_output() && !spec_.kv_cache.is_fp8())
      error(n, "fp8_scale needs fp8 codes to scale: `output_dtype: fp8_e4m3 | fp8_e5m2` or an fp8 kv_cache");
    else if (spec_.output_quant.enabled && spec_.fp8_scale == Fp8Scale::Multiply)
      error(n, "fp8_scale: multiply has no per-tensor scale to apply with output_quant (its scales divide)");
  }

  // Per-group scales of fp8 outputs: groups within a row, q alone (the
  // call refuses k), forward or inverse (backward) rotation.
  void read_output_quant() {
    const YAML::Node n = root_["output_quant"];
    if (!n) return;
    OutputQuant& quant = spec_.output_quant;
    quant.enabled = true;
    read_enum(n, "scale", quant.scale);
    const long long group = as_integer(n["group"]);
    if (group < 1 || spec_.head_dim < 1 || group > spec_.head_dim || spec_.head_dim % group != 0)
      error(n["group"], fmt::format("output_quant.group ({}) must divide head_dim ({}): a row's dims form whole groups",
                                    group, spec_.head_dim));
    else quant.group = static_cast<int>(group);
    if (!spec_.has_fp8_output())
      error(n, "output_quant needs `output_dtype: fp8_e4m3 | fp8_e5m2`: it chooses the scales of fp8 codes");
    if (spec_.kv_cache.enabled) error(n, "output_quant cannot be combined with kv_cache: it quantizes q alone");
    if (spec_.qk_norm.enabled) error(n, "output_quant cannot be combined with qk_norm (not generated)");
  }

  // The spec's dtype, or fp8 codes of q and k: the one conversion a rope
  // output can have (a float dtype other than the inputs' is not one).
  void read_output_dtype() {
    spec_.output_dtype = as_stored(spec_.dtype);
    read_enum(root_, "output_dtype", spec_.output_dtype);
    if (!spec_.has_fp8_output() && spec_.output_dtype != as_stored(spec_.dtype))
      error(root_["output_dtype"],
            fmt::format("output_dtype `{}` differs from dtype `{}`: rope outputs have the spec's dtype or are fp8 "
                        "codes (fp8_e4m3, fp8_e5m2)",
                        to_string(spec_.output_dtype), to_string(spec_.dtype)));
  }

  static KvDType as_stored(DType d) {
    return d == DType::F32 ? KvDType::F32 : d == DType::F16 ? KvDType::F16 : KvDType::BF16;
  }

  void read_rope_dims() {
    read_enum(root_, "pairing", spec_.pairing);
    spec_.output_pairing = spec_.pairing;
    read_enum(root_, "output_pairing", spec_.output_pairing);
    read_layout({Layout::BSHD, Layout::BHSD, Layout::SBHD, Layout::THD});
    read_positions();

    const YAML::Node head = root_["head_dim"];
    const long long head_dim = as_integer(head);
    if (head_dim < 2 || head_dim > kMaxHeadDim || head_dim % 2 != 0) {
      error(head, fmt::format("head_dim ({}) must be even and in 2..{}", head_dim, kMaxHeadDim));
      return;  // the rotary checks below are meaningless without it
    }
    spec_.head_dim = static_cast<int>(head_dim);

    long long offset = 0;
    if (const YAML::Node n = root_["rotary_offset"]) {
      offset = as_integer(n);
      if (offset < 0 || offset > head_dim - 2) {
        error(n, fmt::format("rotary_offset ({}) must be in 0..{} (head_dim - 2) so at least one pair is rotated",
                             offset, head_dim - 2));
        return;
      }
    }
    spec_.rotary_offset = static_cast<int>(offset);

    long long rotary = head_dim - offset;
    if (const YAML::Node n = root_["rotary_dim"]) {
      rotary = as_integer(n);
      // Compared with head_dim - offset: rotary + offset could overflow.
      if (rotary < 2 || rotary % 2 != 0 || rotary > head_dim - offset) {
        error(n, fmt::format("rotary_dim ({}) must be even and in 2..{} (head_dim {} - rotary_offset {})", rotary,
                             head_dim - offset, head_dim, offset));
        return;
      }
    }
    spec_.rotary_dim = static_cast<int>(rotary);
  }

  // A required count; `max` keeps it far inside an int.
  int read_count(const char* key, long long max) {
    const YAML::Node n = root_[key];
    const long long v = as_integer(n);
    if (v < 1 || v > max) error(n, fmt::format("{} ({}) must be in 1..{}", key, v, max));
    return static_cast<int>(v);
  }

  // Sinusoidal and learned tables are added to the rows of x: [B, S, D]
  // unless the spec says otherwise.
  void read_table_encoding(PositionsMode default_positions) {
    spec_.dim = read_count("dim", kMaxDim);
    spec_.layout = Layout::BSD;
    read_layout({Layout::BSD, Layout::SBD, Layout::TD});
    spec_.positions = default_positions;
    read_positions();
  }

  void read_sinusoidal() {
    read_table_encoding(PositionsMode::Implicit);
    spec_.base = read_positive(root_, "base", spec_.base);
    read_enum(root_, "table_form", spec_.table_form);
  }

  void read_alibi() {
    spec_.num_heads = read_count("num_heads", kMaxHeads);
    read_enum(root_, "form", spec_.alibi_form);
  }

  // A list that must hold one number per rotary pair.
  std::vector<double> read_pair_list(const YAML::Node& n, const char* what, bool positive) {
    std::vector<double> values = as_number_list(n);
    if (spec_.rotary_dim == 0) return values;
    if (values.size() != static_cast<size_t>(spec_.num_pairs()))
      error(n, fmt::format("{} has {} entries but needs rotary_dim / 2 = {} (one per rotary pair)", what,
                           values.size(), spec_.num_pairs()));
    if (positive)
      for (size_t i = 0; i < values.size(); ++i)
        if (!(values[i] > 0)) {
          error(n[i], fmt::format("{}[{}] ({}) must be > 0", what, i, values[i]));
          break;
        }
    return values;
  }

  double read_number(const YAML::Node& map, const char* key, double fallback, const char* rule,
                     bool (*ok)(double)) {
    const YAML::Node n = map[key];
    if (!n) return fallback;
    const double v = as_number(n);
    if (!ok(v)) error(n, fmt::format("{} ({}) must be {}", key, v, rule));
    return v;
  }
  double read_positive(const YAML::Node& map, const char* key, double fallback) {
    return read_number(map, key, fallback, "> 0", [](double v) { return v > 0; });
  }

  void read_frequency() {
    const YAML::Node f = root_["frequency"];
    if (!f) return;
    Frequency& freq = spec_.frequency;
    read_enum(f, "scheme", freq.scheme);
    freq.theta = read_positive(f, "theta", freq.theta);
    freq.max_freq = read_positive(f, "max_freq", freq.max_freq);
    freq.value = read_number(f, "value", freq.value, "finite", [](double) { return true; });
    if (const YAML::Node n = f["values"]) freq.values = read_pair_list(n, "frequency.values", false);
  }

  void read_scaling() {
    const YAML::Node s = root_["scaling"];
    if (!s) return;
    Scaling& sc = spec_.scaling;
    read_enum(s, "type", sc.type);
    sc.factor = read_positive(s, "factor", sc.factor);
    if (const YAML::Node n = s["original_max_position"]) {
      sc.original_max_position = as_integer(n);
      // At least 2: LongRoPE's attention factor divides by ln(original_max_position).
      if (sc.original_max_position < 2 || sc.original_max_position > kMaxPosition)
        error(n, fmt::format("original_max_position ({}) must be in 2..{} ({}, the largest position)",
                             sc.original_max_position, kMaxPosition, kMaxPositionText));
    }
    sc.beta_fast = read_positive(s, "beta_fast", sc.beta_fast);
    sc.beta_slow = read_positive(s, "beta_slow", sc.beta_slow);
    if (s["beta_fast"] || s["beta_slow"])
      if (!(sc.beta_fast > sc.beta_slow))
        error(s[s["beta_fast"] ? "beta_fast" : "beta_slow"],
              fmt::format("beta_fast ({}) must be greater than beta_slow ({})", sc.beta_fast, sc.beta_slow));
    if (const YAML::Node n = s["mscale"]) sc.mscale = as_number(n);
    if (const YAML::Node n = s["mscale_all_dim"]) sc.mscale_all_dim = as_number(n);
    if (const YAML::Node n = s["truncate"]) sc.truncate = as_boolean(n);
    if (s["attention_factor"]) sc.attention_factor = read_positive(s, "attention_factor", 1.0);
    if (const YAML::Node n = s["short_factor"]) sc.short_factor = read_pair_list(n, "scaling.short_factor", true);
    if (const YAML::Node n = s["long_factor"]) sc.long_factor = read_pair_list(n, "scaling.long_factor", true);
    read_enum(s, "policy", sc.policy);
    sc.low_freq_factor = read_positive(s, "low_freq_factor", sc.low_freq_factor);
    sc.high_freq_factor = read_positive(s, "high_freq_factor", sc.high_freq_factor);
    if (sc.type == ScalingType::Llama3 && !(sc.high_freq_factor > sc.low_freq_factor))
      error(s[s["high_freq_factor"] ? "high_freq_factor" : "type"],
            fmt::format("high_freq_factor ({}) must be greater than low_freq_factor ({})", sc.high_freq_factor,
                        sc.low_freq_factor));
    // theta' = theta * x^(d/(d-2)) is undefined for a single rotary pair.
    if ((sc.type == ScalingType::Ntk || sc.type == ScalingType::Dynamic) && spec_.rotary_dim == 2)
      error(s["type"], fmt::format("scaling type `{}` needs rotary_dim >= 4 (its exponent is rotary_dim / (rotary_dim - 2))",
                                   to_string(sc.type)));
    const bool uses_log_theta = sc.type == ScalingType::Yarn;
    if (uses_log_theta && spec_.frequency.theta <= 1.0)
      error(s["type"], fmt::format("scaling type `yarn` needs frequency.theta > 1 (got {})", spec_.frequency.theta));
    const bool lang_only = sc.type == ScalingType::Ntk || sc.type == ScalingType::Dynamic ||
                           sc.type == ScalingType::Yarn || sc.type == ScalingType::LongRope ||
                           sc.type == ScalingType::Llama3;
    if (spec_.frequency.scheme == FrequencyScheme::Runtime && sc.type != ScalingType::None)
      error(s["type"], fmt::format("scaling type `{}` cannot be used with frequency scheme `runtime`: the "
                                   "frequencies are given at run time, so scaling cannot be applied to them "
                                   "(use type none)",
                                   to_string(sc.type)));
    else if (spec_.frequency.scheme == FrequencyScheme::Table && sc.type != ScalingType::None)
      error(s["type"], fmt::format("scaling type `{}` cannot be used with frequency scheme `table`: cos_sin_cache "
                                   "holds cos and sin as they are used (scaled, the attention factor included), so "
                                   "there is nothing to scale; leave scaling out (or use type none)",
                                   to_string(sc.type)));
    else if (lang_only && spec_.frequency.scheme != FrequencyScheme::Lang)
      error(s["type"], fmt::format("scaling type `{}` rescales theta and needs frequency scheme `lang` (got `{}`)",
                                   to_string(sc.type), to_string(spec_.frequency.scheme)));
  }

  void read_xpos() {
    const YAML::Node x = root_["xpos"];
    if (!x) return;
    spec_.xpos.enabled = true;
    if (spec_.frequency.scheme == FrequencyScheme::Table)
      error(x, "xpos cannot be used with frequency scheme `table`: a cos/sin cache has no xPos scale (queries and "
               "keys are scaled differently)");
    spec_.xpos.scale_base = read_number(x, "scale_base", spec_.xpos.scale_base, ">= 1",
                                        [](double v) { return v >= kMinXposScaleBase; });
  }

  // Multi-axis RoPE: the rotary pairs are split among the axes of the
  // positions' trailing dim. Read after everything it must agree with.
  void read_axes() {
    const YAML::Node a = root_["axes"];
    if (!a) return;
    Axes& axes = spec_.axes;
    if (const YAML::Node n = a["interleaved"]) axes.interleaved = as_boolean(n);
    if (const YAML::Node n = a["per_axis_frequencies"]) axes.per_axis_frequencies = as_boolean(n);
    if (read_sections(a["sections"]) && axes.interleaved) check_round_robin(a["interleaved"]);
    if (spec_.positions != PositionsMode::Explicit)
      error(a, "axes need `positions: explicit` (the positions carry a trailing dim with one entry per axis)");
    const Scaling& sc = spec_.scaling;
    if (spec_.xpos.enabled)
      error(a, "axes cannot be combined with xpos: its scale depends on a single position and the run-time seq_len");
    if (sc.type == ScalingType::Dynamic || (sc.type == ScalingType::LongRope && sc.policy == LongRopePolicy::PerCall))
      error(a, fmt::format("axes cannot be combined with scaling type `{}`{}: its frequencies depend on the "
                           "run-time seq_len, which multi-axis positions do not define",
                           to_string(sc.type), sc.type == ScalingType::LongRope ? " with policy per_call" : ""));
    if (axes.per_axis_frequencies && spec_.frequency.scheme == FrequencyScheme::Runtime)
      error(a["per_axis_frequencies"], "per_axis_frequencies cannot be used with frequency scheme `runtime`: the "
                                       "inv_freq tensor already gives every pair's frequency");
    if (axes.per_axis_frequencies && spec_.frequency.scheme == FrequencyScheme::Table)
      error(a["per_axis_frequencies"], "per_axis_frequencies cannot be used with frequency scheme `table`: "
                                       "cos_sin_cache already gives every pair's cos and sin");
  }

  // The fused KV-cache append. Tokens are rows of a packed batch (thd) at
  // explicit positions, as in FlashInfer's append and vLLM's
  // reshape_and_cache; the position of a token also says where it goes.
  void read_kv_cache() {
    const YAML::Node kv = root_["kv_cache"];
    if (!kv) return;
    KvCache& c = spec_.kv_cache;
    c.enabled = true;
    read_enum(kv, "layout", c.layout);
    c.dtype = as_stored(spec_.dtype);
    read_enum(kv, "dtype", c.dtype);
    c.page_size = c.layout == KvLayout::Contiguous ? 1 : 16;
    if (const YAML::Node n = kv["page_size"]) {
      const long long v = as_integer(n);
      if (v < 1 || v > kMaxPageSize) error(n, fmt::format("page_size ({}) must be in 1..{}", v, kMaxPageSize));
      else c.page_size = static_cast<int>(v);
    }
    // fp8 caches: `scale: per_tensor` (the default, and the one scaling
    // there is: k_scale and v_scale come with each call).
    if (const YAML::Node n = kv["scale"]; n && !c.is_fp8())
      error(n, fmt::format("kv_cache scale is for fp8 caches; dtype `{}` stores values as they are (leave scale out)",
                           to_string(c.dtype)));
    if (spec_.layout != Layout::THD)
      error(root_["layout"] ? root_["layout"] : kv,
            fmt::format("kv_cache needs `layout: thd` (tokens [T, H, D], as FlashInfer and vLLM append them); "
                        "got `{}`", to_string(spec_.layout)));
    if (spec_.positions != PositionsMode::Explicit)
      error(kv, "kv_cache needs `positions: explicit`: a token's position also says where it goes in the cache");
    if (spec_.axes.enabled())
      error(kv, "kv_cache cannot be combined with axes: a token's cache entry is at its one position");
  }

  // Per-head RMSNorm before the rotation. eps is added to a float32 mean of
  // squares, so it must be a float32 normal number.
  void read_qk_norm() {
    const YAML::Node n = root_["qk_norm"];
    if (!n) return;
    QkNorm& norm = spec_.qk_norm;
    norm.enabled = true;
    read_enum(n, "type", norm.type);
    read_enum(n, "weight", norm.weight);
    norm.eps = read_number(n, "eps", norm.eps, "> 0 and a float32 normal number (1.2e-38 .. 3.4e38)", [](double v) {
      return v >= static_cast<double>(std::numeric_limits<float>::min()) &&
             v <= static_cast<double>(std::numeric_limits<float>::max());
    });
  }

  // Whether the sections are valid and split exactly the rotary pairs.
  bool read_sections(const YAML::Node& n) {
    if (n.size() < 1 || n.size() > kMaxAxes) {
      error(n, fmt::format("axes.sections has {} entries but needs 1..{} (one per position axis)", n.size(), kMaxAxes));
      return false;
    }
    if (spec_.rotary_dim == 0) return false;  // rotary_dim has its own error
    const int pairs = spec_.num_pairs();
    int sum = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      const long long v = as_integer(n[i]);
      if (v < 1 || v > pairs) {
        error(n[i], fmt::format("axes.sections[{}] ({}) must be in 1..{} (rotary_dim / 2)", i, v, pairs));
        return false;
      }
      spec_.axes.sections.push_back(static_cast<int>(v));
      sum += static_cast<int>(v);
    }
    if (sum != pairs)
      error(n, fmt::format("axes.sections sum to {} but must sum to rotary_dim / 2 = {} (every rotary pair "
                           "belongs to one axis)", sum, pairs));
    return sum == pairs;
  }

  // Qwen3-VL's round robin gives pair r to axis a >= 1 when r % n_axes == a
  // and r < n_axes * sections[a]: pairs a, a + n_axes, ..., sections[a] of
  // them, the last of which must be a pair (Qwen3.5: sections [11, 11, 10]
  // over 32 pairs gives axis 1 the pairs 1, 4, ..., 31).
  void check_round_robin(const YAML::Node& at) {
    const Axes& axes = spec_.axes;
    for (int a = 1; a < axes.count(); ++a) {
      const int last = a + axes.count() * (axes.sections[a] - 1);
      if (last >= spec_.num_pairs()) {
        error(at, fmt::format("interleaved axes give axis a >= 1 the pairs a, a + n_axes, ... (sections[a] of them); "
                              "axis {}'s last would be pair {}, past the {} pairs of rotary_dim / 2", a, last,
                              spec_.num_pairs()));
        return;
      }
    }
  }

  const YamlDocument& doc_;
  const YAML::Node root_;
  const SpecDefaults defaults_;
  RopeSpec spec_;
  std::vector<Diagnostic> errors_;
};

}  // namespace

// Checked by hand, as std::regex recurses once per character (a 30k-character name overflowed the stack).
bool is_identifier(const std::string& s) {
  const auto starts = [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; };
  const auto continues = [&](char c) { return starts(c) || (c >= '0' && c <= '9'); };
  return !s.empty() && s.size() <= kMaxNameLength && starts(s[0]) && std::all_of(s.begin(), s.end(), continues);
}

Result<RopeSpec> build_spec(const YamlDocument& doc, const SpecDefaults& defaults) {
  return SpecBuilder(doc, defaults).run();
}

}  // namespace ropegen::dsl
