#include "hf_layer_values.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "hf_json.h"

namespace ropegen::hf {
namespace {

using json = nlohmann::json;

const json kEmpty = json::object();

// The keys of a layer's overrides that rope-gen reads; the others (Gemma 4's num_key_value_heads, NeoMME's
// sliding_window) may differ between layers of a type.
const char* const kReadKeys[] = {"head_dim", "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head",
                                 "partial_rotary_factor", "rotary_pct", "rotary_dim", "qk_rope_head_dim",
                                 "qk_nope_head_dim", "rope_interleave", "max_position_embeddings",
                                 "original_max_position_embeddings"};

json read_keys_of(const json& overrides) {
  json out = json::object();
  for (const char* key : kReadKeys)
    if (auto it = overrides.find(key); it != overrides.end()) out[key] = *it;
  return out;
}

// config.json's per_layer_config: {layer index (zero-padded text): overrides}. Layers of one type must agree, as
// transformers' per_layer_config[layer_type] requires.
std::map<std::string, LayerValues> from_per_layer_config(const json& overrides, const std::string& where,
                                                         const std::vector<std::string>& layer_types, JsonReader& r) {
  const std::string at = where + "per_layer_config";
  std::map<size_t, std::pair<std::string, const json*>> by_index;
  for (auto& [key, v] : overrides.items()) {
    const bool digits = !key.empty() && key.size() <= 9 &&
                        std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::isdigit(c); });
    const size_t index = digits ? std::stoul(key) : 0;
    if (!digits || index >= layer_types.size()) {
      r.error(fmt::format("`{}` keys are layer indices below the {} entries of `{}layer_types`, not `{}`", at,
                          layer_types.size(), where, key.substr(0, 40)));
      return {};
    }
    if (!v.is_object() || v.contains("rope_parameters")) {
      r.error(fmt::format("`{}.{}` must be an object of the layer's own values (rope parameters per layer type go "
                          "in `{}rope_parameters`)", at, key, where));
      return {};
    }
    by_index[index] = {key, &v};
  }
  std::map<std::string, LayerValues> out;
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < layer_types.size(); ++i) {
    const auto it = by_index.find(i);
    const json v = it == by_index.end() ? kEmpty : read_keys_of(*it->second.second);
    const std::string& type = layer_types[i];
    if (auto seen = out.find(type); seen != out.end()) {
      if (seen->second.values != v) {
        r.error(fmt::format("`{}`: layers {} and {} are both {} but their values differ; transformers (and rope-gen) "
                            "take one set per layer type", at, first[type], i, type));
        return {};
      }
      continue;
    }
    first[type] = i;
    out[type] = {v, it == by_index.end() ? where : fmt::format("{}.{}.", at, it->second.first), "per_layer_config"};
  }
  return out;
}

}  // namespace

std::map<std::string, LayerValues> layer_values(const json& config, const std::string& where,
                                                const std::vector<std::string>& layer_types, const json* entry,
                                                JsonReader& r) {
  if (const json* overrides = r.object(config, where, "per_layer_config"))
    return from_per_layer_config(*overrides, where, layer_types, r);
  if (!entry) return {};
  std::map<std::string, LayerValues> out;
  if (auto defaults = entry->find("layer_type_defaults"); defaults != entry->end())
    for (auto& [type, values] : defaults->items()) out[type] = {values, where, "the config class's default"};
  if (auto keys = entry->find("layer_type_keys"); keys != entry->end()) {
    for (auto& [type, names] : keys->items()) {
      for (auto& [key, name] : names.items()) {
        // the class turns this key into the layer type's value (Gemma 4: global_head_dim -> head_dim)
        const std::string spelled = name.get<std::string>();
        if (auto v = r.positive_int(config, where, spelled.c_str())) {
          LayerValues& lv = out[type];
          lv.values[key] = *v;
          lv.where = where;
          lv.source = spelled;
        }
      }
    }
  }
  return out;
}

}  // namespace ropegen::hf
