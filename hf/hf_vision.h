// `rope-gen from-hf --vision`: the 2D RoPE of a multimodal model's vision
// tower (vision_config) as a two-axis spec, for the towers of
// tools/hf_config/hf_vision.json (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Pixtral /
// Mistral 3, Llama 4), whose head size, pairing and frequency layout
// tests/golden/hf_vision_cases.py measured by running HF's own code. Any
// other tower is refused by name: nothing is guessed.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hf_config.h"

namespace ropegen::hf {

Result<HfImport> spec_from_hf_vision_config(const nlohmann::json& config, const std::string& file,
                                            const HfImportOptions& options);

}  // namespace ropegen::hf
