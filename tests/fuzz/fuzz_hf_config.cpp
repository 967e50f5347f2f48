// libFuzzer target: any bytes as a Hugging Face config.json through from-hf's
// converter (JSON -> spec; text model, each layer type, the vision tower) must give a spec or diagnostics, never a crash,
// hang or uncaught exception; a spec it gives must parse back to itself.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hf_config.h"
#include "hf_json.h"
#include "hf_vision.h"
#include "ropegen/spec_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ropegen::Result<nlohmann::json> config = ropegen::hf::parse_hf_config(text, "fuzz.json");
  if (!config.ok()) return 0;
  ropegen::hf::HfImportOptions options;
  (void)ropegen::hf::hf_layer_types(*config, "fuzz.json", options);
  // A name that is not a spec name: refused by name, whatever the config.
  options.name = "../fuzz";
  if (ropegen::hf::spec_from_hf_config(*config, "fuzz.json", options).ok()) std::abort();
  options.name.reset();
  // Layer types of Gemma 3/4, DeepSeek-V4's rope sets and one of its attention layer types, NoPE, the vision tower.
  for (const char* layer : {"", "sliding_attention", "full_attention", "main", "compress", "compressed_sparse_attention",
                            "nope", "--vision"}) {
    const bool vision = std::string(layer) == "--vision";
    options.layer_type = *layer && !vision ? std::optional<std::string>(layer) : std::nullopt;
    options.pairing = *layer && !vision ? std::optional<ropegen::Pairing>(ropegen::Pairing::Half) : std::nullopt;
    ropegen::Result<ropegen::hf::HfImport> import =
        vision ? ropegen::hf::spec_from_hf_vision_config(*config, "fuzz.json", options)
               : ropegen::hf::spec_from_hf_config(*config, "fuzz.json", options);
    if (!import.ok()) {
      (void)ropegen::format(import.errors());
      continue;
    }
    const std::string yaml = ropegen::to_yaml(import->spec);
    ropegen::Result<ropegen::RopeSpec> again = ropegen::parse_spec(yaml, "converted.yaml");
    if (!again.ok() || ropegen::to_yaml(*again) != yaml) std::abort();
  }
  return 0;
}
