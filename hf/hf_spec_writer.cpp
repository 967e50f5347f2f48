#include "hf_spec_writer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hf_json.h"
#include "hf_models.h"

namespace ropegen::hf {
namespace {

using json = nlohmann::json;

class SpecWriter {
 public:
  SpecWriter(const ResolvedModel& model, const HfImportOptions& options, JsonReader& r, HfImport& out)
      : m_(model), options_(options), r_(r), out_(out) {}

  void run() {
    set_dims();
    set_pairing();
    set_dtype();
    set_frequency_and_scaling();
    set_axes();
  }

 private:
  // The table entry's value of a key, or null.
  const json& table(const char* key) const {
    static const json kNull;
    if (!m_.entry) return kNull;
    auto it = m_.entry->find(key);
    return it == m_.entry->end() ? kNull : *it;
  }

  // How config.json spells a key of the config class (its attribute_map: GPT-J n_embd, DBRX n_heads).
  std::string spelled(const char* key) const {
    const json& names = table("key_names");
    return names.is_object() ? names.value(key, std::string(key)) : std::string(key);
  }
  // Where a key's value is, and how messages name it: the layer type's own values (Gemma 4's per_layer_config),
  // the (text) config, else the config class's defaults.
  std::pair<const json*, std::string> located(const char* key) const {
    if (m_.layer.contains(key)) return {&m_.layer, m_.layer_where};
    if (auto it = m_.config->find(spelled(key)); it != m_.config->end() && !it->is_null())
      return {m_.config, m_.where};
    return {m_.defaults->contains(key) ? m_.defaults : m_.config, m_.where};
  }
  const char* name_in(const json* j, const char* key) {
    spelled_ = j == m_.config ? spelled(key) : std::string(key);
    return spelled_.c_str();
  }
  // The key's value in the config, else its default.
  std::optional<double> number(const char* key) {
    auto [j, where] = located(key);
    return r_.number(*j, where, name_in(j, key));
  }
  std::optional<int> positive_int(const char* key) {
    auto [j, where] = located(key);
    return r_.positive_int(*j, where, name_in(j, key));
  }
  // The key's value where config.json itself gives it (not a class default).
  std::optional<double> given_number(const char* key) {
    auto [j, where] = located(key);
    return j == m_.defaults ? std::nullopt : r_.number(*j, where, name_in(j, key));
  }

  void set_dims() {
    if (table("rope_slice") == "trailing") return set_trailing_dims();
    RopeSpec& s = out_.spec;
    // DeepSeek MLA: only the qk_rope_head_dim trailing dims of each head rotate.
    if (auto rope_dim = positive_int("qk_rope_head_dim")) {
      const double nope_dims = number("qk_nope_head_dim").value_or(0);
      if (nope_dims < 0 || nope_dims > (1 << 24) || nope_dims != std::floor(nope_dims)) {
        r_.error(fmt::format("`{}qk_nope_head_dim` must be a non-negative integer, not {}", m_.where, nope_dims));
        return;
      }
      const int nope = static_cast<int>(nope_dims);
      s.rotary_dim = *rope_dim;
      s.rotary_offset = nope;
      s.head_dim = nope + s.rotary_dim;
      out_.notes.push_back(fmt::format("MLA head: {} no-rope dims, then {} rope dims (qk_nope_head_dim, "
                                       "qk_rope_head_dim); apply to the full q head, or set head_dim {} and "
                                       "rotary_offset 0 to apply to q_pe / k_pe alone",
                                       nope, s.rotary_dim, s.rotary_dim));
      return;
    }
    if (!set_head_dim()) return;
    // GPT-J / CodeGen give the rotary size directly (when the table saw HF read that key); others a fraction.
    const bool reads_rotary_dim = !m_.entry || m_.entry->value("reads_rotary_dim", false);
    if (auto rotary = reads_rotary_dim ? positive_int("rotary_dim") : std::nullopt) {
      s.rotary_dim = *rotary;
    } else {
      std::optional<double> partial = partial_rotary_factor();
      if (!partial) partial = number("rotary_pct");  // GPT-NeoX
      if (partial && !valid_fraction(*partial)) return;
      s.rotary_dim = static_cast<int>(s.head_dim * partial.value_or(1.0));  // HF: int(head_dim * factor)
    }
    if (s.rotary_dim % 2 != 0) {
      out_.notes.push_back(fmt::format("HF's rotary size int(head_dim * partial_rotary_factor) = {} is odd; "
                                       "rounded down to {}", s.rotary_dim, s.rotary_dim - 1));
      s.rotary_dim -= 1;
    }
  }

  // head_dim, else hidden_size // num_attention_heads (HF); false when neither is known.
  bool set_head_dim() {
    std::optional<int> head = positive_int("head_dim");
    if (!head) {
      std::optional<int> hidden, heads;
      for (const char* key : {"hidden_size", "n_embd", "d_model"})
        if (!hidden) hidden = positive_int(key);
      for (const char* key : {"num_attention_heads", "n_head"})
        if (!heads) heads = positive_int(key);
      if (!hidden || !heads) {
        r_.error("cannot tell the head size: the config has neither `head_dim` nor `hidden_size` and "
                 "`num_attention_heads` (nor does its config class have defaults for them)");
        return false;
      }
      head = *hidden / *heads;  // HF: hidden_size // num_attention_heads
    }
    out_.spec.head_dim = *head;
    return true;
  }

  std::optional<double> partial_rotary_factor() {
    std::optional<double> partial = r_.number(m_.rope, m_.rope_where, "partial_rotary_factor");
    return partial ? partial : number("partial_rotary_factor");
  }
  bool valid_fraction(double partial) {
    if (partial > 0 && partial <= 1) return true;
    r_.error(fmt::format("`partial_rotary_factor` ({}) must be in (0, 1]", partial));
    return false;
  }

  // DeepSeek-V4: each head is [nope | rope], the rope part its trailing partial_rotary_factor x head_dim dims
  // (older configs: qk_rope_head_dim of them).
  void set_trailing_dims() {
    RopeSpec& s = out_.spec;
    if (!set_head_dim()) return;
    std::optional<double> partial = r_.number(m_.rope, m_.rope_where, "partial_rotary_factor");
    if (!partial) partial = given_number("partial_rotary_factor");
    std::optional<int> rope_dims = partial ? std::nullopt : positive_int("qk_rope_head_dim");
    if (rope_dims && given_number("qk_rope_head_dim")) {
      partial = static_cast<double>(*rope_dims) / s.head_dim;  // HF: qk_rope_head_dim / head_dim
    } else if (!partial) {
      partial = number("partial_rotary_factor");
    }
    if (partial && !valid_fraction(*partial)) return;
    s.rotary_dim = static_cast<int>(s.head_dim * partial.value_or(1.0));  // HF: int(head_dim * factor)
    s.rotary_dim -= s.rotary_dim % 2;
    s.rotary_offset = s.head_dim - s.rotary_dim;
    out_.notes.push_back(fmt::format("head: {} no-rope dims, then {} rope dims, the trailing slice HF's `{}` "
                                     "rotates", s.rotary_offset, s.rotary_dim,
                                     table("apply_function").get<std::string>()));
  }

  void set_pairing() {
    RopeSpec& s = out_.spec;
    if (!m_.entry || m_.entry->contains("refused")) {
      s.pairing = s.output_pairing = *options_.pairing;
      return;
    }
    const std::string apply = table("apply_function").get<std::string>();
    s.pairing = table("pairing") == "half" ? Pairing::Half : Pairing::Interleaved;
    s.output_pairing = m_.entry->value("output_pairing", table("pairing").get<std::string>()) == "half"
                           ? Pairing::Half
                           : Pairing::Interleaved;
    // DeepSeek-V3: the attention picks the interleaving apply only with rope_interleave (the table ran the default).
    auto [j, where] = located("rope_interleave");
    if (table("rope_interleave_selects") == true && !r_.boolean(*j, where, "rope_interleave").value_or(true))
      s.pairing = s.output_pairing = Pairing::Half;
    if (options_.pairing && *options_.pairing != s.pairing) {
      r_.error(fmt::format("pairing {}: transformers' {} pairs {} ({}); the flag is for model types the table "
                           "does not know", to_string(*options_.pairing), m_.table_type, to_string(s.pairing), apply));
      return;
    }
    out_.notes.push_back(fmt::format("pairing: {}{}, as transformers {} `{}` applies it ({}, run on unit vectors)",
                                     to_string(s.pairing),
                                     s.output_pairing != s.pairing ? fmt::format(" in, {} out", to_string(s.output_pairing)) : "",
                                     hf_models().at("transformers").get<std::string>(), m_.table_type, apply));
    if (s.output_pairing != s.pairing)
      out_.notes.push_back("in-place calls need output_pairing interleaved, which gives the same attention scores");
  }

  // A position count: an integer in 1..2^40 (HF reads them as ints).
  std::optional<double> position(const json& j, const std::string& where, const char* key) {
    std::optional<double> v = r_.number(j, where, key);
    if (v && !(*v >= 1 && *v <= 1099511627776.0 && *v == std::floor(*v))) {
      r_.error(fmt::format("`{}{}` must be a whole number of positions in 1..2^40, not {}", where, key, *v));
      return std::nullopt;
    }
    return v;
  }

  // torch_dtype (4.x) or dtype (5.x), in the text config or the outer one.
  void set_dtype() {
    std::vector<std::pair<const json*, std::string>> configs = {{m_.config, m_.where}};
    if (m_.config != m_.outer) configs.push_back({m_.outer, ""});
    set_hf_dtype(r_, configs, out_);
  }

  void set_frequency_and_scaling() {
    RopeSpec& s = out_.spec;
    Scaling& sc = s.scaling;
    const json& rope = m_.rope;
    const std::string& rp = m_.rope_where;
    std::optional<double> theta = r_.number(rope, rp, "rope_theta");
    s.frequency.theta = theta.value_or(10000.0);
    if (!theta) out_.notes.push_back("no rope_theta in the config or its class: 10000 (HF's default)");

    std::string type = r_.string(rope, rp, "rope_type").value_or(r_.string(rope, rp, "type").value_or("default"));
    if (type == "su") type = "longrope";  // old Phi-3 spelling
    auto [max_json, max_where] = located("max_position_embeddings");
    const std::optional<double> max_pos =
        position(*max_json, max_where, name_in(max_json, "max_position_embeddings"));
    // HF moves a top-level original_max_position_embeddings (Phi-3) into the
    // rope parameters, ahead of the one already there.
    std::optional<double> original = position(*m_.config, m_.where, "original_max_position_embeddings");
    if (!original) original = position(rope, rp, "original_max_position_embeddings");
    if (!original && (type == "yarn" || type == "longrope" || type == "llama3")) original = max_pos;
    const std::string where = fmt::format("rope type `{}`", type);
    auto required = [&](const char* key) {
      if (auto v = r_.number(rope, rp, key)) return *v;
      r_.error(fmt::format("{} needs a numeric `{}{}`", where, rp, key));
      return 1.0;
    };

    if (type == "default" || type == "mrope") {  // mrope: the sections are read by set_axes
      sc.type = ScalingType::None;
    } else if (type == "linear") {
      sc.type = ScalingType::Linear;
      sc.factor = required("factor");
    } else if (type == "dynamic") {
      sc.type = ScalingType::Dynamic;
      sc.factor = required("factor");
      // HF's dynamic NTK divides by max_position_embeddings, not the original.
      if (!max_pos) r_.error("dynamic scaling needs `max_position_embeddings`");
      sc.original_max_position = static_cast<int64_t>(max_pos.value_or(1));
    } else if (type == "yarn" || type == "longrope") {
      sc.type = type == "yarn" ? ScalingType::Yarn : ScalingType::LongRope;
      if (!original) r_.error(fmt::format("{} needs original_max_position_embeddings or max_position_embeddings", where));
      sc.original_max_position = static_cast<int64_t>(original.value_or(1));
      if (auto f = r_.number(rope, rp, "factor")) {
        sc.factor = *f;
      } else if (max_pos && original) {
        sc.factor = *max_pos / *original;  // HF: max_position_embeddings / original
        out_.notes.push_back(fmt::format("factor {} = max_position_embeddings / original_max_position_embeddings",
                                         sc.factor));
      } else {
        r_.error(fmt::format("{} needs `factor` or max_position_embeddings", where));
      }
      sc.attention_factor = r_.number(rope, rp, "attention_factor");
      if (sc.type == ScalingType::Yarn) {
        // HF: `beta_fast or 32`: zero or absent means the default.
        if (auto b = r_.number(rope, rp, "beta_fast"); b && *b != 0) sc.beta_fast = *b;
        if (auto b = r_.number(rope, rp, "beta_slow"); b && *b != 0) sc.beta_slow = *b;
        sc.mscale = r_.number(rope, rp, "mscale");
        sc.mscale_all_dim = r_.number(rope, rp, "mscale_all_dim");
        sc.truncate = r_.boolean(rope, rp, "truncate").value_or(true);
      } else {
        sc.short_factor = r_.numbers(rope, rp, "short_factor").value_or(std::vector<double>{});
        sc.long_factor = r_.numbers(rope, rp, "long_factor").value_or(std::vector<double>{});
      }
    } else if (type == "llama3") {
      sc.type = ScalingType::Llama3;
      sc.factor = required("factor");
      sc.low_freq_factor = required("low_freq_factor");
      sc.high_freq_factor = required("high_freq_factor");
      sc.original_max_position = static_cast<int64_t>(original.value_or(0));
      if (sc.low_freq_factor == sc.high_freq_factor) llama3_as_two_bands();
    } else if (type == "proportional") {
      proportional();
    } else {
      r_.error(fmt::format("rope type `{}` ({}rope_type) is not supported; rope-gen understands default, linear, "
                           "dynamic, yarn, longrope (su), llama3, proportional", type, rp));
    }
  }

  // HF's proportional RoPE (Gemma 4's full-attention layers): theta^(-2i/head_dim) / factor on the first
  // int(partial_rotary_factor * head_dim // 2) pairs, zero (no rotation) on the rest, half pairing over the
  // whole head: custom frequencies.
  void proportional() {
    RopeSpec& s = out_.spec;
    const std::optional<double> partial = partial_rotary_factor();
    const double factor = r_.number(m_.rope, m_.rope_where, "factor").value_or(1.0);
    if (!(factor > 0)) r_.error(fmt::format("`{}factor` must be > 0, not {}", m_.rope_where, factor));
    const int angles = static_cast<int>(std::floor(std::clamp(partial.value_or(1.0), 0.0, 1.0) * s.head_dim / 2));
    s.rotary_dim = s.head_dim;
    s.rotary_offset = 0;
    s.frequency.scheme = FrequencyScheme::Custom;
    s.frequency.values.assign(s.head_dim / 2, 0.0);
    for (int i = 0; i < angles; ++i)
      s.frequency.values[i] = std::pow(s.frequency.theta, -2.0 * i / s.head_dim) / factor;
    out_.notes.push_back(fmt::format("proportional RoPE: {} rotating pairs over the whole head of {}{}, the rest "
                                     "with frequency 0", angles, s.head_dim,
                                     factor != 1.0 ? fmt::format(", frequencies divided by factor {}", factor) : ""));
  }

  // HF's llama3 with low_freq_factor == high_freq_factor (Llama 4): no medium
  // band, so wavelengths above original / low are divided by factor and the
  // rest kept. The spec's llama3 needs high > low: the same frequencies as
  // custom values.
  void llama3_as_two_bands() {
    RopeSpec& s = out_.spec;
    const Scaling sc = s.scaling;
    const double cutoff = static_cast<double>(sc.original_max_position) / sc.low_freq_factor;
    s.frequency.scheme = FrequencyScheme::Custom;
    s.frequency.values.clear();
    for (int i = 0; i < s.rotary_dim / 2; ++i) {
      const double inv = std::pow(s.frequency.theta, -2.0 * i / s.rotary_dim);
      s.frequency.values.push_back(2 * M_PI / inv > cutoff ? inv / sc.factor : inv);
    }
    s.scaling = Scaling{};
    out_.notes.push_back(fmt::format("llama3 scaling with low_freq_factor = high_freq_factor = {}: two bands (HF's "
                                     "medium band is empty), written as custom frequencies: theta^(-2i/d), divided "
                                     "by {} where the wavelength exceeds {}", sc.low_freq_factor, sc.factor, cutoff));
  }

  // M-RoPE (Qwen2-VL, GLM-4V: contiguous sections; Qwen3-VL, Qwen3-Omni: round robin): mrope_section splits the
  // rotary pairs among the (temporal, height, width) position ids. Where the table measured the model's M-RoPE,
  // its layout is the code's (HF's modules do not read mrope_interleaved) and its sections the code's default.
  void set_axes() {
    const std::string& rp = m_.rope_where;
    const json& measured = table("mrope");
    auto sections = r_.ints(m_.rope, rp, "mrope_section");
    if (!sections && measured.contains("sections")) {
      sections = measured.at("sections").get<std::vector<int>>();
      out_.notes.push_back(fmt::format("mrope_section {}: the default of transformers' `{}` (the config names none)",
                                       fmt::join(*sections, ", "), table("rotary_class").get<std::string>()));
    }
    if (!sections) {
      if (measured.is_object())
        r_.error(fmt::format("transformers' {} is M-RoPE, and this config names no `{}mrope_section` (nor has the "
                             "module a default rope-gen has measured)", m_.table_type, rp));
      return;
    }
    Axes& axes = out_.spec.axes;
    axes.sections = *sections;
    const std::optional<bool> key = r_.boolean(m_.rope, rp, "mrope_interleaved");
    if (measured.is_object()) {
      axes.interleaved = measured.at("layout") == "interleaved";
      if (key && *key != axes.interleaved)
        out_.notes.push_back(fmt::format("`{}mrope_interleaved` {} is not what HF's code does: it ignores the key",
                                         rp, *key));
    } else {
      axes.interleaved = key.value_or(false);
    }
    out_.spec.positions = PositionsMode::Explicit;
    out_.notes.push_back(fmt::format("M-RoPE: positions are explicit, [..., {}] (one id per axis of mrope_section{})",
                                     axes.count(), axes.interleaved ? ", interleaved" : ""));
  }

  const ResolvedModel& m_;
  const HfImportOptions& options_;
  JsonReader& r_;
  HfImport& out_;
  std::string spelled_;  // name_in's result, alive until the look-up that uses it returns
};

}  // namespace

void write_spec(const ResolvedModel& model, const HfImportOptions& options, JsonReader& r, HfImport& out) {
  SpecWriter(model, options, r, out).run();
}

}  // namespace ropegen::hf
