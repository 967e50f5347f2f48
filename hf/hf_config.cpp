#include "hf_config.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsl/shown_text.h"
#include "dsl/spec_name.h"
#include "hf_json.h"
#include "hf_layer_values.h"
#include "hf_models.h"
#include "hf_spec_writer.h"
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

std::string derived_name(const std::string& text) {
  std::string name = text;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) {
    return std::isalnum(ch) ? static_cast<char>(std::tolower(ch)) : '_';
  });
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "m_" + name;
  return name.substr(0, dsl::kMaxNameLength);
}

std::string spec_name(const HfImportOptions& options, const std::string& fallback, JsonReader& r) {
  if (!options.name) return derived_name(fallback);
  if (!dsl::is_identifier(*options.name))
    r.error(fmt::format("--name `{}`: a spec name must be an identifier, [a-z_][a-z0-9_]* and at most {} characters "
                        "(it prefixes the kernel's symbols and names --all-layer-types' files); from-hf uses a name "
                        "it is given as it is", dsl::shown(*options.name), dsl::kMaxNameLength));
  return *options.name;
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
    out_.spec.name = spec_name(options_, model_type_.empty() ? "model" : model_type_, r_);
    write_spec(model_, options_, r_, out_);
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
    model_.outer = model_.config = &outer_;
    model_.defaults = &kEmpty;
    select_text_config();
    find_model();
    if (errors_.empty()) collect_layer_types();
    if (errors_.empty()) layer_values_ = layer_values(*model_.config, model_.where, config_types_, model_.entry, r_);
    return errors_.empty();
  }

  // Multimodal models keep the language model's settings in `text_config` (Qwen3-Omni: thinker_config.text_config,
  // where the table says transformers finds it); the model_type that names the model stays outside.
  void select_text_config() {
    model_type_ = r_.string(outer_, "", "model_type").value_or("");
    std::vector<std::string> path = {"text_config"};
    if (const json* e = hf_model(model_type_); e && e->contains("text_config_path"))
      path = e->at("text_config_path").get<std::vector<std::string>>();
    const json* c = &outer_;
    std::string where;
    for (const std::string& key : path) {
      if (!(c = r_.object(*c, where, key.c_str()))) return;
      where += key + ".";
    }
    model_.config = c;
    model_.where = where;
    text_type_ = r_.string(*c, where, "model_type").value_or("");
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
    const json* entry = text_type_.empty() ? outer_entry : hf_model(text_type_);
    if (!entry && !named_by_config) {
      entry = outer_entry;
      text_type_.clear();
    }
    const std::string named = text_type_.empty() ? model_type_ : text_type_;
    if (!entry) {
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
    model_.entry = entry;
    if (entry->contains("defaults")) model_.defaults = &entry->at("defaults");
    if (auto why = entry->find("unsupported"); why != entry->end()) {
      // a construct the spec cannot express: no flag makes a spec of it
      r_.error(fmt::format("model_type `{}`: a spec cannot express the RoPE of transformers {}: {}", named, version,
                           why->get<std::string>()));
    } else if (auto refused = entry->find("refused"); refused != entry->end() && !options_.pairing) {
      r_.error(fmt::format("model_type `{}`: rope-gen cannot tell its RoPE from transformers {}: {}; if the text "
                           "attention is plain RoPE, say how it pairs dims: pairing half or pairing interleaved",
                           named, version, refused->get<std::string>()));
    }
    model_.table_type = named;
  }

  // The config, where it has the key, else the config class's defaults.
  const json& merged(const char* key) const {
    if (auto it = c().find(key); it != c().end() && !it->is_null()) return c();
    return model_.defaults->contains(key) ? *model_.defaults : c();
  }
  const json& c() const { return *model_.config; }
  const std::string& where() const { return model_.where; }
  const json& table(const char* key) const {
    static const json kNull;
    return model_.entry && model_.entry->contains(key) ? model_.entry->at(key) : kNull;
  }

  // The rope parameters of each layer type (HF 5.x `rope_parameters`, possibly
  // nested per layer type; 4.x `rope_scaling` + `rope_theta`, with the keys
  // the config class moves to other layer types, e.g. Gemma 3's
  // rope_local_base_freq, DeepSeek-V4's compress_rope_theta), and the layer
  // types as layer_type names them.
  void collect_layer_types() {
    const json* given = r_.object(c(), where(), "rope_parameters");
    given_ = given != nullptr;
    const json& default_rp =
        model_.defaults->contains("rope_parameters") ? model_.defaults->at("rope_parameters") : kEmpty;
    const json* legacy = table("legacy_layer_keys").is_object() ? &table("legacy_layer_keys") : nullptr;
    // A flat rope_parameters the config class spreads over the layer types as it does rope_scaling (DeepSeek-V4).
    const bool spread = given && !nested(*given) && legacy && table("splits_flat_rope_parameters") == true;
    const json* scaling = spread ? given : given ? nullptr : r_.object(c(), where(), "rope_scaling");
    rope_where_ = where() + (given || !scaling ? "rope_parameters." : "rope_scaling.");
    std::map<std::string, json>& per_layer = per_layer_;
    if (given && !nested(*given)) {
      for (auto& [key, v] : given->items())
        if (v.is_object()) {  // one layer type's parameters beside flat keys: HF's nesting is all or nothing
          r_.error(fmt::format("`{}rope_parameters` mixes per-layer-type objects (`{}`) with other keys; nest every "
                               "layer type's parameters or none", where(), key));
          return;
        }
    }
    const bool from_feeds = legacy && (!given || spread);
    if (given && nested(*given)) {
      for (auto& [lt, p] : given->items()) per_layer[lt] = p;
    } else if (from_feeds) {
      for (auto& [lt, feed] : legacy->items()) per_layer[lt] = fed_parameters(feed, scaling);
    }
    std::map<std::string, std::string>& theta_notes = theta_notes_;
    for (auto& [lt, p] : per_layer)
      theta_notes[lt] = fill_theta(p, default_rp.contains(lt) ? default_rp.at(lt) : kEmpty, !from_feeds);
    if (per_layer.empty()) {
      rope_ = given ? *given : scaling ? *scaling : json::object();
      theta_notes[""] = fill_theta(rope_, nested(default_rp) ? kEmpty : default_rp, true);
    }
    std::vector<std::string>& types = types_;
    for (auto& [lt, p] : per_layer) types.push_back(lt);
    nope_ = nope_layers();
    if (!nope_.empty()) types.push_back("nope");
    if (!nope_.empty() && nope_.size() == nope_layer_count_) {
      r_.error(fmt::format("`{}no_rope_layers`: every layer applies no RoPE; there is no spec to write", where()));
      return;
    }
    config_types_ = r_.strings(merged("layer_types"), where(), "layer_types").value_or(std::vector<std::string>{});
    const std::set<std::string> distinct(config_types_.begin(), config_types_.end());
    if (per_layer.empty()) types.insert(types.begin(), distinct.begin(), distinct.end());
  }

  // One layer type's rope parameters from 4.x keys, as the table measured the config class: the scaling when it
  // reaches this layer type, the theta of the type's own key (the class ignores one in the scaling then), and the
  // keys the class adds to a yarn scaling there (DeepSeek-V4: attention_factor 1).
  json fed_parameters(const json& feed, const json* scaling) {
    json p = scaling && feed.at("rope_scaling").get<bool>() ? *scaling : json::object();
    if (auto key = feed.find("rope_theta"); key != feed.end()) {
      p.erase("rope_theta");
      if (auto theta = r_.number(c(), where(), key->get<std::string>().c_str())) p["rope_theta"] = *theta;
    }
    const std::string type = p.value("rope_type", p.value("type", std::string("default")));
    if (auto adds = feed.find("yarn_adds"); adds != feed.end() && type == "yarn")
      for (auto& [k, v] : adds->items())
        if (!p.contains(k)) p[k] = v;
    return p;
  }

  // The rope parameters this spec is for: the chosen layer type's, or the
  // ones every layer type shares; and the chosen layer type's own values.
  void select_rope_parameters() {
    const std::map<std::string, json>& per_layer = per_layer_;
    const std::vector<std::string>& types = types_;
    const std::vector<int>& nope = nope_;
    const std::set<std::string> config_types(config_types_.begin(), config_types_.end());
    const bool differ = (per_layer.size() > 1 && std::any_of(per_layer.begin(), per_layer.end(), [&](const auto& kv) {
                          return kv.second != per_layer.begin()->second;
                        })) || layer_values_differ();
    std::optional<std::string> chosen = options_.layer_type;
    // DeepSeek-V4 keys its rope parameters by sets (main, compress) that its attention picks per layer type.
    const std::string set = rope_set_of(chosen.value_or(""));
    if (chosen && !set.empty()) {
      out_.notes.push_back(fmt::format("layer type {}: transformers' {} attention applies the rope parameters `{}`",
                                       *chosen, model_.table_type, set));
      chosen = set;
    }
    if (chosen && *chosen == "nope" && !nope.empty()) {
      r_.error(fmt::format("layer type `nope`: layers {} apply no RoPE (no_rope_layers[i] = 0); there is no spec for "
                           "them", fmt::join(nope, ", ")));
    } else if (chosen && per_layer.count(*chosen)) {
      rope_ = per_layer.at(*chosen);
      if (given_) rope_where_ += *chosen + ".";
      out_.notes.push_back(fmt::format("layer type {}: its own rope parameters{}", *chosen, set_users(*chosen)));
    } else if (chosen && (!per_layer.empty() || !config_types.count(*chosen))) {
      r_.error(fmt::format("layer_type {}: this config has no such layer type with RoPE parameters; it has {}{}",
                           *chosen, types.empty() ? std::string("one RoPE for every layer")
                                                  : fmt::format("{}", fmt::join(types, ", ")), rope_sets_text()));
    } else if (!chosen && differ) {
      r_.error(fmt::format("this config's layer types differ in RoPE ({}); choose one with layer_type{}",
                           fmt::join(types, ", "), rope_sets_text()));
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
    if (chosen && layer_values_.count(*chosen)) {
      const LayerValues& lv = layer_values_.at(*chosen);
      model_.layer = lv.values;
      model_.layer_where = lv.where;
      for (auto& [key, v] : lv.values.items())
        out_.notes.push_back(fmt::format("layer type {}: {} {} ({})", *chosen, key, v.dump(), lv.source));
    }
    model_.rope = rope_;
    model_.rope_where = rope_where_;
    if (table("output_rotation") == "inverse") out_.notes.push_back(inverse_output_note());
  }

  // Whether the layer types' own values differ (Gemma 4's head sizes).
  bool layer_values_differ() const {
    auto values = [&](const std::string& t) -> const json& {
      auto it = layer_values_.find(t);
      return it == layer_values_.end() ? kEmpty : it->second.values;
    };
    return std::any_of(config_types_.begin(), config_types_.end(),
                       [&](const std::string& t) { return values(t) != values(config_types_.front()); });
  }

  // The rope parameter set a layer type's attention uses, when the table measured one (else empty).
  std::string rope_set_of(const std::string& layer_type) const {
    if (!table("rope_sets").is_object() || per_layer_.count(layer_type)) return "";
    for (auto& [set, users] : table("rope_sets").items())
      for (const json& user : users)
        if (user == layer_type) return set;
    return "";
  }
  // ", used by ... layers" for a rope set.
  std::string set_users(const std::string& set) const {
    if (!table("rope_sets").contains(set)) return "";
    const auto users = table("rope_sets").at(set).get<std::vector<std::string>>();
    return fmt::format(" (transformers' {} attention uses them on {} layers)", model_.table_type,
                       fmt::join(users, ", "));
  }
  std::string rope_sets_text() const {
    if (!table("rope_sets").is_object()) return "";
    std::vector<std::string> parts;
    for (auto& [set, users] : table("rope_sets").items())
      parts.push_back(fmt::format("`{}` for {}", set, fmt::join(users.get<std::vector<std::string>>(), ", ")));
    return fmt::format(" (or an attention layer type: {})", fmt::join(parts, "; "));
  }
  // The table measured that HF's attention also rotates its output back: the spec's backward kernel does that.
  std::string inverse_output_note() const {
    return fmt::format("transformers' {} attention also rotates its output's rope slice back (cos, -sin: the rotation "
                       "by -angle at the query's position); that is this spec's backward kernel on the output: "
                       "`rope-gen apply --backward`, ropegen.torch.Rope.backward, Call::backward = true",
                       model_.table_type);
  }

  // HF: a layer's rope_theta, else (`from_config`) the config's rope_theta
  // (old spellings too), else the class default; the note says when the
  // default filled it.
  std::string fill_theta(json& p, const json& default_p, bool from_config) {
    if (p.contains("rope_theta")) return "";
    for (const char* key : {"rope_theta", "rotary_emb_base", "rope_embedding_base"}) {
      if (auto theta = from_config ? r_.number(c(), where(), key) : std::nullopt) {
        p["rope_theta"] = *theta;
        return "";
      }
    }
    if (!default_p.contains("rope_theta")) return "";
    p["rope_theta"] = default_p.at("rope_theta");
    return fmt::format("rope_theta {} is the default of transformers' {} config class",
                       default_p.at("rope_theta").dump(), model_.table_type);
  }

  std::vector<int> nope_layers() {
    if (!table("nope_key").is_string()) return {};
    const std::string key = table("nope_key").get<std::string>();
    const std::vector<int> layers = r_.ints(merged(key.c_str()), where(), key.c_str()).value_or(std::vector<int>{});
    nope_layer_count_ = layers.size();
    return nope_layer_indices(layers);
  }

  const json& outer_;
  std::string file_;
  const HfImportOptions& options_;
  std::vector<Diagnostic> errors_;
  JsonReader r_;
  std::string model_type_, text_type_;
  ResolvedModel model_;  // what write_spec() writes the spec from
  json rope_ = json::object();
  size_t nope_layer_count_ = 0;  // entries of no_rope_layers
  // Every layer type's rope parameters (empty: one set for all), where a default filled each one's theta ("": for
  // all), the layer types as layer_type names them, the NoPE layers, the config's layer_types (in layer order),
  // each layer type's own values.
  std::map<std::string, json> per_layer_;
  std::map<std::string, std::string> theta_notes_;
  std::vector<std::string> types_;
  std::vector<int> nope_;
  std::vector<std::string> config_types_;
  std::map<std::string, LayerValues> layer_values_;
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
