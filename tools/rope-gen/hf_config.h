// A rope-gen spec from a Hugging Face model config (config.json), following
// how transformers' modeling_rope_utils reads it: rope_parameters (v5) or
// rope_scaling (v4), rope_theta, partial_rotary_factor, head_dim.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::cli {

struct HfImport {
  RopeSpec spec;
  std::vector<std::string> notes;  // what the config could not tell; printed as comments
};

struct HfImportOptions {
  std::optional<std::string> name;        // default: from model_type
  std::optional<std::string> layer_type;  // for per-layer rope_parameters (e.g. gemma3)
};

Result<HfImport> spec_from_hf_config(const nlohmann::json& config, const std::string& file,
                                     const HfImportOptions& options);

// The spec text printed by `rope-gen from-hf`: notes as comments, then the normalised spec.
std::string hf_import_text(const HfImport& import, const std::string& file);

}  // namespace ropegen::cli
