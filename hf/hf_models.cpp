#include "hf_models.h"

namespace ropegen::hf {

extern const char* const kHfModelsJson;

const nlohmann::json& hf_models() {
  static const nlohmann::json table = nlohmann::json::parse(kHfModelsJson);
  return table;
}

const nlohmann::json* hf_model(const std::string& model_type) {
  const nlohmann::json& models = hf_models().at("models");
  auto it = models.find(model_type);
  return it == models.end() ? nullptr : &*it;
}

}  // namespace ropegen::hf
