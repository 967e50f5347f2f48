// Each layer type's own values of keys from-hf reads, for configs whose layers
// differ in more than their rope parameters (Gemma 4: the full_attention
// layers' head_dim 512, the sliding ones' 256), as transformers resolves them:
// config.json's `per_layer_config` (overrides keyed by layer index, one set
// per layer type), else the keys the model table says the config class turns
// into one layer type's value (`global_head_dim`), over the class's own
// defaults for that layer type.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ropegen::hf {

class JsonReader;

struct LayerValues {
  nlohmann::json values = nlohmann::json::object();  // {key: value}, only the keys where the layer type differs
  std::string where;   // how messages name the keys: "text_config.per_layer_config.05."
  std::string source;  // for the spec's comments: "per_layer_config", "global_head_dim", "the config class's default"
};

// {layer type: its values} for `layer_types` (the config's, in layer order); empty when the layers share every
// value. `entry` is the model table's entry (nullptr: none). Mistakes go to the reader's errors.
std::map<std::string, LayerValues> layer_values(const nlohmann::json& config, const std::string& where,
                                                const std::vector<std::string>& layer_types,
                                                const nlohmann::json* entry, JsonReader& r);

}  // namespace ropegen::hf
