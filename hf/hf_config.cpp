#include "hf_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hf_json.h"
#include "hf_models.h"
#include "hf_vision.h"
#include "ropegen/spec_io.h"

namespace ropegen::hf {
namespace {

using json = nlohmann::json;

const json kEmpty = json::object();

bool nested(const json& rp) {
  return rp.is_object() && !rp.empty() &&
         std::all_of(rp.begin(), rp.end(), [](const json& v) { return v.is_object(); });
}

// The layers of no_rope_layers that apply no RoPE (HF: use_rope = no_rope_layers[layer_idx]).
std::vector<int> nope_layer_indices(const std::vector<int>& no_rope_layers) {
  std::vector<int> out;
  for (size_t i = 0; i < no_rope_layers.size(); ++i)
    if (no_rope_layers[i] == 0) out.push_back(static_cast<int>(i));
  return out;
}

}  // namespace

Result<HfImport> validated_import(HfImport import, const std::string& file) {
  Result<RopeSpec> checked = parse_spec(to_yaml(import.spec), file + " (converted)");
  if (!checked) return checked.errors();
  import.spec = *checked;
  return import;
}

void set_hf_dtype(JsonReader& r, const std::vector<std::pair<const json*, std::string>>& configs, HfImport& out) {
  std::optional<std::string> dtype;
  for (const auto& [j, where] : configs)
    for (const char* key : {"dtype", "torch_dtype"})
      if (!dtype) dtype = r.string(*j, where, key);
  const std::map<std::string, DType> known = {{"float32", DType::F32}, {"float16", DType::F16}, {"bfloat16", DType::BF16}};
  if (!dtype) {
    out.notes.push_back("dtype: f32 (the config names none)");
  } else if (known.count(*dtype)) {
    out.spec.dtype = known.at(*dtype);
    out.notes.push_back(fmt::format("dtype: {}, the config's {}", to_string(out.spec.dtype), *dtype));
  } else {
    r.error(fmt::format("`dtype` {} is not one rope-gen stores (float32, float16, bfloat16)", *dtype));
  }
}

namespace {

class Importer {
 public:
  Importer(const json& config, std::string file, const HfImportOptions& options)
      : outer_(config), file_(std::move(file)), options_(options), r_(file_, &errors_) {}

  // The layer types, as layer_type takes them; NoPE layers as `nope`.
  Result<std::vector<std::string>> layer_types() {
    if (!read_model()) return errors_;
    return types_;
  }

  Result<HfImport> run() {
    if (!read_model()) return errors_;
    select_rope_parameters();
    if (!errors_.empty()) return errors_;
    set_name();
    set_dims();
    set_pairing();
    set_dtype();
    set_frequency_and_scaling();
    set_axes();
    if (!errors_.empty()) return errors_;
    return validated_import(std::move(out_), file_);
  }

 private:
  // The model's config and its layer types, what both questions start from; false on errors.
  bool read_model() {
    if (!outer_.is_object()) {
      errors_.push_back(named_error(file_, "a Hugging Face config must be a JSON object"));
      return false;
    }
    select_text_config();
    find_model();
    if (errors_.empty()) collect_layer_types();
    return errors_.empty();
  }

  // Multimodal models keep the language model's settings in `text_config`;
  // the model_type that names the model stays outside.
  void select_text_config() {
    model_type_ = r_.string(outer_, "", "model_type").value_or("");
    if (const json* text = r_.object(outer_, "", "text_config")) {
      c_ = text;
      where_ = "text_config.";
      text_type_ = r_.string(*text, where_, "model_type").value_or("");
    }
  }

  // The table's entry: the text model's own when it has one.
  void find_model() {
    const std::string version = hf_models().at("transformers").get<std::string>();
    const json* outer_entry = hf_model(model_type_);
    // A text model_type the config names must be known; one only the table names (the config class's default
    // text model) falls back to the outer entry.
    const bool named_by_config = !text_type_.empty();
    if (!named_by_config && outer_entry && outer_entry->contains("text_model_type"))
      text_type_ = outer_entry->at("text_model_type").get<std::string>();
    entry_ = text_type_.empty() ? outer_entry : hf_model(text_type_);
    if (!entry_ && !named_by_config) {
      entry_ = outer_entry;
      text_type_.clear();
    }
    const std::string named = text_type_.empty() ? model_type_ : text_type_;
    if (!entry_) {
      if (options_.pairing) {
        out_.notes.push_back(fmt::format("model_type `{}` is not in rope-gen's table (transformers {}): pairing {} "
                                         "as pairing says; defaults are HF's generic ones",
                                         named, version, to_string(*options_.pairing)));
        return;
      }
      r_.error(fmt::format("model_type `{}` is not in rope-gen's model table (generated from transformers {}); "
                           "if its attention applies RoPE, say how its apply function pairs dims: pairing half "
                           "(rotate_half: (i, i + d/2)) or pairing interleaved ((2i, 2i+1))",
                           model_type_.empty() ? "(none)" : named, version));
      return;
    }
    if (entry_->contains("defaults")) defaults_ = &entry_->at("defaults");
    if (auto refused = entry_->find("refused"); refused != entry_->end() && !options_.pairing) {
      r_.error(fmt::format("model_type `{}`: rope-gen cannot tell its RoPE from transformers {}: {}; if the text "
                           "attention is plain RoPE, say how it pairs dims: pairing half or pairing interleaved",
                           named, version, refused->get<std::string>()));
    }
    table_type_ = named;
  }

  // How config.json spells a key of the config class (its attribute_map: GPT-J n_embd, DBRX n_heads).
  std::string spelled(const char* key) const {
    if (!entry_ || !entry_->contains("key_names")) return key;
    return entry_->at("key_names").value(key, std::string(key));
  }
  // The (text) config, where it has the key, else the config class's defaults.
  const json& merged(const char* key) const {
    if (auto it = c_->find(spelled(key)); it != c_->end() && !it->is_null()) return *c_;
    return defaults_->contains(key) ? *defaults_ : *c_;
  }
  // The key's value in the config, else its default.
  std::optional<double> number(const char* key) {
    const json& j = merged(key);
    return r_.number(j, where_, &j == c_ ? spelled(key).c_str() : key);
  }
  std::optional<int> positive_int(const char* key) {
    const json& j = merged(key);
    return r_.positive_int(j, where_, &j == c_ ? spelled(key).c_str() : key);
  }

  // The rope parameters of each layer type (HF 5.x `rope_parameters`, possibly
  // nested per layer type; 4.x `rope_scaling` + `rope_theta`, with the keys
  // the config class moves to other layer types, e.g. Gemma 3's
  // rope_local_base_freq), and the layer types as layer_type names them.
  void collect_layer_types() {
    const json* given = r_.object(*c_, where_, "rope_parameters");
    given_ = given != nullptr;
    const json* scaling = given ? nullptr : r_.object(*c_, where_, "rope_scaling");
    rope_where_ = where_ + (scaling ? "rope_scaling." : "rope_parameters.");
    const json& default_rp = defaults_->contains("rope_parameters") ? defaults_->at("rope_parameters") : kEmpty;
    const json* legacy = entry_ && entry_->contains("legacy_layer_keys") ? &entry_->at("legacy_layer_keys") : nullptr;
    std::map<std::string, json>& per_layer = per_layer_;
    if (given && !nested(*given)) {
      for (auto& [key, v] : given->items())
        if (v.is_object()) {  // one layer type's parameters beside flat keys: HF's nesting is all or nothing
          r_.error(fmt::format("`{}rope_parameters` mixes per-layer-type objects (`{}`) with other keys; nest every "
                               "layer type's parameters or none", where_, key));
          return;
        }
    }
    if (given && nested(*given)) {
      for (auto& [lt, p] : given->items()) per_layer[lt] = p;
    } else if (!given && legacy) {
      // Each layer type's theta comes from its own key (rope_theta, rope_local_base_freq) or the class default.
      for (auto& [lt, feed] : legacy->items()) {
        json p = scaling && feed.at("rope_scaling").get<bool>() ? *scaling : json::object();
        if (auto key = feed.find("rope_theta"); key != feed.end()) {
          if (auto theta = r_.number(*c_, where_, key->get<std::string>().c_str())) p["rope_theta"] = *theta;
        }
        per_layer[lt] = p;
      }
    }
    std::map<std::string, std::string>& theta_notes = theta_notes_;
    for (auto& [lt, p] : per_layer)
      theta_notes[lt] = fill_theta(p, default_rp.contains(lt) ? default_rp.at(lt) : kEmpty, !legacy || given);
    if (per_layer.empty()) {
      rope_ = given ? *given : scaling ? *scaling : json::object();
      theta_notes[""] = fill_theta(rope_, nested(default_rp) ? kEmpty : default_rp, true);
    }
    std::vector<std::string>& types = types_;
    for (auto& [lt, p] : per_layer) types.push_back(lt);
    nope_ = nope_layers();
    if (!nope_.empty()) types.push_back("nope");
    if (!nope_.empty() && nope_.size() == nope_layer_count_) {
      r_.error(fmt::format("`{}no_rope_layers`: every layer applies no RoPE; there is no spec to write", where_));
      return;
    }
    config_types_ = config_layer_types();
    if (per_layer.empty()) types.insert(types.begin(), config_types_.begin(), config_types_.end());
  }

  // The rope parameters this spec is for: the chosen layer type's, or the
  // ones every layer type shares.
  void select_rope_parameters() {
    const std::map<std::string, json>& per_layer = per_layer_;
    const std::vector<std::string>& types = types_;
    const std::vector<int>& nope = nope_;
    const std::set<std::string>& config_types = config_types_;
    const bool given = given_;
    const bool differ = per_layer.size() > 1 && std::any_of(per_layer.begin(), per_layer.end(), [&](const auto& kv) {
                          return kv.second != per_layer.begin()->second;
                        });
    const std::optional<std::string>& chosen = options_.layer_type;
    if (chosen && *chosen == "nope" && !nope.empty()) {
      r_.error(fmt::format("layer type `nope`: layers {} apply no RoPE (no_rope_layers[i] = 0); there is no spec for "
                           "them", fmt::join(nope, ", ")));
    } else if (chosen && per_layer.count(*chosen)) {
      rope_ = per_layer.at(*chosen);
      if (given) rope_where_ += *chosen + ".";
      out_.notes.push_back(fmt::format("layer type {}: its own rope parameters", *chosen));
    } else if (chosen && (!per_layer.empty() || !config_types.count(*chosen))) {
      r_.error(fmt::format("layer_type {}: this config has no such layer type with RoPE parameters; it has {}",
                           *chosen, types.empty() ? std::string("one RoPE for every layer")
                                                  : fmt::format("{}", fmt::join(types, ", "))));
    } else if (!chosen && differ) {
      r_.error(fmt::format("this config's layer types differ in RoPE ({}); choose one with layer_type",
                           fmt::join(types, ", ")));
    } else if (!per_layer.empty()) {
      rope_ = per_layer.begin()->second;
      out_.notes.push_back(fmt::format("layer types {}: the same rope parameters", fmt::join(types, ", ")));
    } else if (chosen) {
      out_.notes.push_back(fmt::format("layer type {}: the same RoPE as every layer", *chosen));
    }
    const std::string& note = theta_notes_[per_layer.empty() ? "" : chosen.value_or(per_layer.begin()->first)];
    if (!note.empty()) out_.notes.push_back(note);
    if (!nope.empty() && !(chosen && *chosen == "nope"))
      out_.notes.push_back(fmt::format("layers {} apply no RoPE (NoPE: no_rope_layers[i] = 0); this spec is for the "
                                       "others", fmt::join(nope, ", ")));
  }

  // HF: a layer's rope_theta, else (`from_config`) the config's rope_theta
  // (old spellings too), else the class default; the note says when the
  // default filled it.
  std::string fill_theta(json& p, const json& default_p, bool from_config) {
    if (p.contains("rope_theta")) return "";
    for (const char* key : {"rope_theta", "rotary_emb_base", "rope_embedding_base"}) {
      if (auto theta = from_config ? r_.number(*c_, where_, key) : std::nullopt) {
        p["rope_theta"] = *theta;
        return "";
      }
    }
    if (!default_p.contains("rope_theta")) return "";
    p["rope_theta"] = default_p.at("rope_theta");
    return fmt::format("rope_theta {} is the default of transformers' {} config class",
                       default_p.at("rope_theta").dump(), table_type_);
  }

  std::vector<int> nope_layers() {
    if (!entry_ || !entry_->contains("nope_key")) return {};
    const std::string key = entry_->at("nope_key").get<std::string>();
    const std::vector<int> layers = r_.ints(merged(key.c_str()), where_, key.c_str()).value_or(std::vector<int>{});
    nope_layer_count_ = layers.size();
    return nope_layer_indices(layers);
  }

  std::set<std::string> config_layer_types() {
    auto types = r_.strings(merged("layer_types"), where_, "layer_types").value_or(std::vector<std::string>{});
    return {types.begin(), types.end()};
  }

  void set_name() {
    std::string name = options_.name.value_or(model_type_.empty() ? "model" : model_type_);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) {
      return std::isalnum(ch) ? static_cast<char>(std::tolower(ch)) : '_';
    });
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "m_" + name;
    out_.spec.name = name.substr(0, 64);
  }

  void set_dims() {
    RopeSpec& s = out_.spec;
    // DeepSeek MLA: only the qk_rope_head_dim trailing dims of each head rotate.
    if (auto rope_dim = positive_int("qk_rope_head_dim")) {
      const double nope_dims = number("qk_nope_head_dim").value_or(0);
      if (nope_dims < 0 || nope_dims > (1 << 24) || nope_dims != std::floor(nope_dims)) {
        r_.error(fmt::format("`{}qk_nope_head_dim` must be a non-negative integer, not {}", where_, nope_dims));
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
        return;
      }
      head = *hidden / *heads;  // HF: hidden_size // num_attention_heads
    }
    s.head_dim = *head;
    // GPT-J / CodeGen give the rotary size directly (when the table saw HF read that key); others a fraction.
    const bool reads_rotary_dim = !entry_ || entry_->value("reads_rotary_dim", false);
    if (auto rotary = reads_rotary_dim ? positive_int("rotary_dim") : std::nullopt) {
      s.rotary_dim = *rotary;
    } else {
      std::optional<double> partial = r_.number(rope_, rope_where_, "partial_rotary_factor");
      if (!partial) partial = number("partial_rotary_factor");
      if (!partial) partial = number("rotary_pct");  // GPT-NeoX
      if (partial && !(*partial > 0 && *partial <= 1)) {
        r_.error(fmt::format("`partial_rotary_factor` ({}) must be in (0, 1]", *partial));
        return;
      }
      s.rotary_dim = static_cast<int>(s.head_dim * partial.value_or(1.0));  // HF: int(head_dim * factor)
    }
    if (s.rotary_dim % 2 != 0) {
      out_.notes.push_back(fmt::format("HF's rotary size int(head_dim * partial_rotary_factor) = {} is odd; "
                                       "rounded down to {}", s.rotary_dim, s.rotary_dim - 1));
      s.rotary_dim -= 1;
    }
  }

  void set_pairing() {
    RopeSpec& s = out_.spec;
    if (!entry_ || entry_->contains("refused")) {
      s.pairing = s.output_pairing = *options_.pairing;
      return;
    }
    const std::string apply = entry_->at("apply_function").get<std::string>();
    s.pairing = entry_->at("pairing") == "half" ? Pairing::Half : Pairing::Interleaved;
    s.output_pairing = entry_->value("output_pairing", entry_->at("pairing").get<std::string>()) == "half"
                           ? Pairing::Half
                           : Pairing::Interleaved;
    // DeepSeek-V3: the attention picks the interleaving apply only with rope_interleave (the table ran the default).
    if (apply == "apply_rotary_pos_emb_interleave" &&
        !r_.boolean(merged("rope_interleave"), where_, "rope_interleave").value_or(true)) {
      s.pairing = s.output_pairing = Pairing::Half;
    }
    if (options_.pairing && *options_.pairing != s.pairing) {
      r_.error(fmt::format("pairing {}: transformers' {} pairs {} ({}); the flag is for model types the table "
                           "does not know", to_string(*options_.pairing), table_type_, to_string(s.pairing), apply));
      return;
    }
    out_.notes.push_back(fmt::format("pairing: {}{}, as transformers {} `{}` applies it ({}, run on unit vectors)",
                                     to_string(s.pairing),
                                     s.output_pairing != s.pairing ? fmt::format(" in, {} out", to_string(s.output_pairing)) : "",
                                     hf_models().at("transformers").get<std::string>(), table_type_, apply));
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
    std::vector<std::pair<const json*, std::string>> configs = {{c_, where_}};
    if (c_ != &outer_) configs.push_back({&outer_, ""});
    set_hf_dtype(r_, configs, out_);
  }

  void set_frequency_and_scaling() {
    RopeSpec& s = out_.spec;
    Scaling& sc = s.scaling;
    const std::string& rp = rope_where_;
    std::optional<double> theta = r_.number(rope_, rp, "rope_theta");
    s.frequency.theta = theta.value_or(10000.0);
    if (!theta) out_.notes.push_back("no rope_theta in the config or its class: 10000 (HF's default)");

    std::string type = r_.string(rope_, rp, "rope_type").value_or(r_.string(rope_, rp, "type").value_or("default"));
    if (type == "su") type = "longrope";  // old Phi-3 spelling
    const std::optional<double> max_pos = position(merged("max_position_embeddings"), where_, "max_position_embeddings");
    // HF moves a top-level original_max_position_embeddings (Phi-3) into the
    // rope parameters, ahead of the one already there.
    std::optional<double> original = position(*c_, where_, "original_max_position_embeddings");
    if (!original) original = position(rope_, rp, "original_max_position_embeddings");
    if (!original && (type == "yarn" || type == "longrope" || type == "llama3")) original = max_pos;
    const std::string where = fmt::format("rope type `{}`", type);
    auto required = [&](const char* key) {
      if (auto v = r_.number(rope_, rp, key)) return *v;
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
      if (auto f = r_.number(rope_, rp, "factor")) {
        sc.factor = *f;
      } else if (max_pos && original) {
        sc.factor = *max_pos / *original;  // HF: max_position_embeddings / original
        out_.notes.push_back(fmt::format("factor {} = max_position_embeddings / original_max_position_embeddings",
                                         sc.factor));
      } else {
        r_.error(fmt::format("{} needs `factor` or max_position_embeddings", where));
      }
      sc.attention_factor = r_.number(rope_, rp, "attention_factor");
      if (sc.type == ScalingType::Yarn) {
        // HF: `beta_fast or 32`: zero or absent means the default.
        if (auto b = r_.number(rope_, rp, "beta_fast"); b && *b != 0) sc.beta_fast = *b;
        if (auto b = r_.number(rope_, rp, "beta_slow"); b && *b != 0) sc.beta_slow = *b;
        sc.mscale = r_.number(rope_, rp, "mscale");
        sc.mscale_all_dim = r_.number(rope_, rp, "mscale_all_dim");
        sc.truncate = r_.boolean(rope_, rp, "truncate").value_or(true);
      } else {
        sc.short_factor = r_.numbers(rope_, rp, "short_factor").value_or(std::vector<double>{});
        sc.long_factor = r_.numbers(rope_, rp, "long_factor").value_or(std::vector<double>{});
      }
    } else if (type == "llama3") {
      sc.type = ScalingType::Llama3;
      sc.factor = required("factor");
      sc.low_freq_factor = required("low_freq_factor");
      sc.high_freq_factor = required("high_freq_factor");
      sc.original_max_position = static_cast<int64_t>(original.value_or(0));
      if (sc.low_freq_factor == sc.high_freq_factor) llama3_as_two_bands();
    } else if (type == "proportional") {
      // theta^(-2i/head_dim) on the first partial*head_dim/2 pairs, zero (no
      // rotation) on the rest, half pairing over the whole head.
      std::optional<double> partial = r_.number(rope_, rp, "partial_rotary_factor");
      if (!partial) partial = number("partial_rotary_factor");
      const int angles = static_cast<int>(std::clamp(partial.value_or(1.0), 0.0, 1.0) * s.head_dim / 2);
      s.rotary_dim = s.head_dim;
      s.rotary_offset = 0;
      s.frequency.scheme = FrequencyScheme::Custom;
      s.frequency.values.assign(s.head_dim / 2, 0.0);
      for (int i = 0; i < angles; ++i) s.frequency.values[i] = std::pow(s.frequency.theta, -2.0 * i / s.head_dim);
      out_.notes.push_back(fmt::format("proportional RoPE: {} rotating pairs over the whole head, the rest with "
                                       "frequency 0", angles));
    } else {
      r_.error(fmt::format("rope type `{}` ({}rope_type) is not supported; rope-gen understands default, linear, "
                           "dynamic, yarn, longrope (su), llama3, proportional", type, rp));
    }
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

  // M-RoPE (Qwen2-VL, Qwen2.5-VL): mrope_section splits the rotary pairs
  // among the (temporal, height, width) position ids, contiguously; Qwen3-VL's
  // mrope_interleaved deals them out round robin instead.
  void set_axes() {
    const std::string& rp = rope_where_;
    auto sections = r_.ints(rope_, rp, "mrope_section");
    if (!sections) return;
    Axes& axes = out_.spec.axes;
    axes.sections = *sections;
    axes.interleaved = r_.boolean(rope_, rp, "mrope_interleaved").value_or(false);
    out_.spec.positions = PositionsMode::Explicit;
    out_.notes.push_back(fmt::format("M-RoPE: positions are explicit, [..., {}] (one id per axis of mrope_section{})",
                                     axes.count(), axes.interleaved ? ", interleaved" : ""));
  }

  const json& outer_;
  const json* c_ = &outer_;
  std::string where_;
  std::string file_;
  const HfImportOptions& options_;
  std::vector<Diagnostic> errors_;
  JsonReader r_;
  std::string model_type_, text_type_, table_type_;
  const json* entry_ = nullptr;
  const json* defaults_ = &kEmpty;
  json rope_ = json::object();
  size_t nope_layer_count_ = 0;  // entries of no_rope_layers
  // Every layer type's rope parameters (empty: one set for all), where a default filled each one's theta ("": for
  // all), the layer types as layer_type names them, the NoPE layers, the config's layer_types.
  std::map<std::string, json> per_layer_;
  std::map<std::string, std::string> theta_notes_;
  std::vector<std::string> types_;
  std::vector<int> nope_;
  std::set<std::string> config_types_;
  bool given_ = false;  // rope_parameters (5.x) rather than rope_scaling / rope_theta
  std::string rope_where_;  // how messages name rope_'s keys: "rope_scaling.", "rope_parameters.full_attention."
  HfImport out_;
};

}  // namespace

Result<HfImport> spec_from_hf_config(const json& config, const std::string& file, const HfImportOptions& options) {
  return Importer(config, file, options).run();
}

Result<HfImport> import_hf(const json& config, const std::string& file, const HfImportOptions& options) {
  return options.vision ? spec_from_hf_vision_config(config, file, options) : spec_from_hf_config(config, file, options);
}

Result<std::vector<std::string>> hf_layer_types(const json& config, const std::string& file,
                                                const HfImportOptions& options) {
  return Importer(config, file, options).layer_types();
}

std::string hf_import_text(const HfImport& import, const std::string& file) {
  std::string out = fmt::format("# rope-gen spec converted from {}\n", file);
  for (const auto& note : import.notes) out += "# " + note + "\n";
  return out + to_yaml(import.spec);
}

}  // namespace ropegen::hf
