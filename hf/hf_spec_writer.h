// The second half of the text-model conversion: once hf_config.cpp has found
// the model's text config, its table entry and the rope parameters of the
// chosen layer type, the spec's head dims, pairing, dtype, frequencies,
// scaling and M-RoPE axes are written from them here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hf_config.h"

namespace ropegen::hf {

class JsonReader;

// What hf_config.cpp resolved. Pointers are into the config and the model table, which outlive the writing.
struct ResolvedModel {
  const nlohmann::json* outer = nullptr;     // the whole config.json
  const nlohmann::json* config = nullptr;    // the text model's (outer, text_config, thinker_config.text_config)
  std::string where;                         // how messages name its keys: "", "text_config."
  const nlohmann::json* entry = nullptr;     // the model table's entry; nullptr for a model type it does not know
  const nlohmann::json* defaults = nullptr;  // the entry's config-class defaults (an empty object when none)
  std::string table_type;                    // the model type the entry is for
  nlohmann::json layer = nlohmann::json::object();  // the chosen layer type's own values (Gemma 4's head_dim)
  std::string layer_where;                   // how messages name them ("text_config.per_layer_config.05.")
  nlohmann::json rope = nlohmann::json::object();   // the rope parameters of the chosen layer type
  std::string rope_where;                    // how messages name them ("text_config.rope_parameters.main.")
};

// Fills out.spec (all but its name) and appends to out.notes; mistakes go to the reader's errors.
void write_spec(const ResolvedModel& model, const HfImportOptions& options, JsonReader& r, HfImport& out);

}  // namespace ropegen::hf
