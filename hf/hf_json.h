// Reading a Hugging Face config.json defensively: a bounded read of a regular
// file (or of DIR/config.json, a hub snapshot), JSON of bounded depth, and
// typed look-ups whose mistakes name the key.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropegen/result.h"

namespace ropegen::hf {

inline constexpr size_t kMaxHfConfigBytes = 16u << 20;  // real configs are a few KB; LongRoPE lists a few more
inline constexpr int kMaxHfConfigDepth = 32;

// The parsed config and the file it came from (PATH, or PATH/config.json for a directory).
struct HfConfigFile {
  std::string path;
  nlohmann::json config;
};

Result<HfConfigFile> read_hf_config(const std::string& path);

// JSON text to a config: not JSON, nested deeper than kMaxHfConfigDepth or not an object is an error.
Result<nlohmann::json> parse_hf_config(const std::string& text, const std::string& file);

// Typed look-ups in one JSON object; `where` prefixes key names in messages ("text_config.").
// Absent and null keys are std::nullopt; a value of the wrong type is an error naming the key.
class JsonReader {
 public:
  JsonReader(std::string file, std::vector<Diagnostic>* errors) : file_(std::move(file)), errors_(errors) {}

  std::optional<double> number(const nlohmann::json& j, const std::string& where, const char* key);
  std::optional<int> positive_int(const nlohmann::json& j, const std::string& where, const char* key);
  std::optional<std::string> string(const nlohmann::json& j, const std::string& where, const char* key);
  std::optional<bool> boolean(const nlohmann::json& j, const std::string& where, const char* key);
  const nlohmann::json* object(const nlohmann::json& j, const std::string& where, const char* key);
  std::optional<std::vector<double>> numbers(const nlohmann::json& j, const std::string& where, const char* key);
  std::optional<std::vector<int>> ints(const nlohmann::json& j, const std::string& where, const char* key);
  std::optional<std::vector<std::string>> strings(const nlohmann::json& j, const std::string& where, const char* key);

  void error(std::string message);

 private:
  const nlohmann::json* find(const nlohmann::json& j, const char* key) const;
  void wrong_type(const std::string& where, const std::string& key, const char* expected, const nlohmann::json& v);

  std::string file_;
  std::vector<Diagnostic>* errors_;
};

}  // namespace ropegen::hf
