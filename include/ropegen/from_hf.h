// A spec from a Hugging Face model config (config.json), as `rope-gen from-hf`
// makes it: rope_parameters (transformers 5.x, possibly one per layer type) or
// rope_scaling + rope_theta (4.x), partial rotary, head_dim, max positions,
// dtype; the pairing and every default from a table generated from
// transformers' own code (nothing is guessed). The spec returned has been
// through rope-gen's own validation, exactly as `rope-gen check` would see it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen {

// The options of `rope-gen from-hf`.
struct FromHfOptions {
  std::optional<std::string> name;        // the spec's name (default: the config's model_type)
  std::optional<std::string> layer_type;  // for models whose layer types differ in RoPE (e.g. gemma3's
                                          // sliding_attention); an error lists the config's layer types
  std::optional<Pairing> pairing;         // for a model_type the table does not know or cannot read
  bool vision = false;                    // the vision tower's 2D RoPE (vision_config) instead of the text model's
};

// From the text of a config.json; `file` names it in diagnostics. Not JSON,
// JSON nested more than 32 levels, or more than 16 MiB is an error too.
Result<RopeSpec> from_hf(std::string_view config_json, const FromHfOptions& options = {},
                         const std::string& file = "config.json");

// From a config.json, or a directory holding one (a hub snapshot). Only
// regular files are read.
Result<RopeSpec> from_hf_file(const std::string& path, const FromHfOptions& options = {});

}  // namespace ropegen
