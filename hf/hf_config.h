// A rope-gen spec from a Hugging Face model config (config.json), following
// how transformers reads it: rope_parameters (5.x, possibly one per layer
// type) or rope_scaling + rope_theta (4.x), partial rotary, head_dim. The
// pairing and every default come from the model table generated from
// transformers itself (hf_models.h); nothing is guessed.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropegen/from_hf.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::hf {

struct HfImport {
  RopeSpec spec;
  std::vector<std::string> notes;  // where each value came from; printed as comments
};

// The public options (include/ropegen/from_hf.h); `vision` picks hf_vision.h's importer.
using HfImportOptions = FromHfOptions;

class JsonReader;

// The model's dtype: `dtype` (5.x) or `torch_dtype` (4.x) in the first of `configs` (object, key prefix for
// messages) that names one; f32 when none does.
void set_hf_dtype(JsonReader& r, const std::vector<std::pair<const nlohmann::json*, std::string>>& configs,
                  HfImport& out);

// A spec name from text from-hf names specs after (model_type, layer type): lower case, any other character as `_`,
// `m_` before a leading digit, at most 64 characters.
std::string derived_name(const std::string& text);

// The spec's name: options.name exactly as given when it is a spec name (else an error naming --name and the rule:
// a name the user chose is never rewritten), or derived_name(fallback).
std::string spec_name(const HfImportOptions& options, const std::string& fallback, JsonReader& r);

// The converted spec, put through rope-gen's own validation (the text we produce must pass it).
Result<HfImport> validated_import(HfImport import, const std::string& file);

Result<HfImport> spec_from_hf_config(const nlohmann::json& config, const std::string& file,
                                     const HfImportOptions& options);

// The text model's spec (spec_from_hf_config) or, with options.vision, its vision tower's
// (spec_from_hf_vision_config): what `rope-gen from-hf` and ropegen::from_hf both call.
Result<HfImport> import_hf(const nlohmann::json& config, const std::string& file, const HfImportOptions& options);

// The config's layer types as --layer-type takes them (`nope` for NoPE layers); empty when the config names none.
Result<std::vector<std::string>> hf_layer_types(const nlohmann::json& config, const std::string& file,
                                                const HfImportOptions& options);

// The spec text printed by `rope-gen from-hf`: notes as comments, then the normalised spec.
std::string hf_import_text(const HfImport& import, const std::string& file);

}  // namespace ropegen::hf
