#include "hf_json.h"

#include <sys/stat.h>

#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "dsl/regular_file.h"

namespace ropegen::hf {
namespace {

using json = nlohmann::json;

Diagnostic diagnostic(const std::string& file, std::string message) { return {{file, -1, -1}, std::move(message), {}}; }

// The deepest nesting of [ and { outside strings, stopping once past `limit`.
int nesting_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}

// A short rendering of a JSON value for messages.
std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

}  // namespace

Result<json> parse_hf_config(const std::string& text, const std::string& file) {
  if (nesting_depth(text, kMaxHfConfigDepth) > kMaxHfConfigDepth)
    return diagnostic(file, fmt::format("JSON nested deeper than {} levels; a model config is not", kMaxHfConfigDepth));
  json config = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return diagnostic(file, "is not valid JSON");
  if (!config.is_object()) return diagnostic(file, "a Hugging Face config must be a JSON object");
  return config;
}

Result<HfConfigFile> read_hf_config(const std::string& path) {
  struct stat st {};
  std::string file = path;
  if (::stat(file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file += "/config.json";  // a hub snapshot: the directory holding config.json
    if (::stat(file.c_str(), &st) != 0) return diagnostic(path, "is a directory without a config.json");
  }
  if (::stat(file.c_str(), &st) != 0) return diagnostic(file, "cannot read it (does it exist?)");
  if (!S_ISREG(st.st_mode)) return diagnostic(file, "is not a regular file (a config.json is)");
  if (static_cast<size_t>(st.st_size) > kMaxHfConfigBytes)
    return diagnostic(file, fmt::format("is {} bytes; a model config is at most {} bytes", st.st_size, kMaxHfConfigBytes));
  // The path may have changed since stat: the read checks its own descriptor again.
  Result<std::string> read = dsl::read_regular_file(file, kMaxHfConfigBytes + 1);
  if (!read) return diagnostic(file, "cannot read it: " + read.errors().front().message);
  const std::string& text = *read;
  if (text.size() > kMaxHfConfigBytes)
    return diagnostic(file, fmt::format("is larger than {} bytes; a model config is not", kMaxHfConfigBytes));
  Result<json> config = parse_hf_config(text, file);
  if (!config) return config.errors();
  return HfConfigFile{file, std::move(*config)};
}

void JsonReader::error(std::string message) { errors_->push_back(diagnostic(file_, std::move(message))); }

const json* JsonReader::find(const json& j, const char* key) const {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

void JsonReader::wrong_type(const std::string& where, const std::string& key, const char* expected, const json& v) {
  error(fmt::format("`{}{}` must be {}, not {}", where, key, expected, shown(v)));
}

std::optional<double> JsonReader::number(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number() || !std::isfinite(v->get<double>())) {
    wrong_type(where, key, "a number", *v);
    return std::nullopt;
  }
  return v->get<double>();
}

std::optional<int> JsonReader::positive_int(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (!v) return std::nullopt;
  const bool ok = v->is_number() && std::isfinite(v->get<double>()) && v->get<double>() >= 1 &&
                  v->get<double>() <= (1 << 24) && v->get<double>() == std::floor(v->get<double>());
  if (!ok) {
    wrong_type(where, key, "a positive integer", *v);
    return std::nullopt;
  }
  return static_cast<int>(v->get<double>());
}

std::optional<std::string> JsonReader::string(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    wrong_type(where, key, "a string", *v);
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<bool> JsonReader::boolean(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    wrong_type(where, key, "true or false", *v);
    return std::nullopt;
  }
  return v->get<bool>();
}

const json* JsonReader::object(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (v && !v->is_object()) {
    wrong_type(where, key, "an object", *v);
    return nullptr;
  }
  return v;
}

namespace {
template <typename T, typename Check>
std::optional<std::vector<T>> list_of(JsonReader& r, const json* v, const std::string& where, const char* key,
                                      const char* expected, Check check) {
  if (!v) return std::nullopt;
  if (!v->is_array()) {
    r.error(fmt::format("`{}{}` must be a list of {}, not {}", where, key, expected, shown(*v)));
    return std::nullopt;
  }
  std::vector<T> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!check(e)) {
      r.error(fmt::format("`{}{}[{}]` must be {}, not {}", where, key, i, expected, shown(e)));
      return std::nullopt;
    }
    out.push_back(e.get<T>());
  }
  return out;
}
}  // namespace

std::optional<std::vector<double>> JsonReader::numbers(const json& j, const std::string& where, const char* key) {
  return list_of<double>(*this, find(j, key), where, key, "numbers",
                         [](const json& e) { return e.is_number() && std::isfinite(e.get<double>()); });
}

std::optional<std::vector<int>> JsonReader::ints(const json& j, const std::string& where, const char* key) {
  return list_of<int>(*this, find(j, key), where, key, "integers", [](const json& e) {
    return e.is_number_integer() && e.get<int64_t>() >= -(1 << 24) && e.get<int64_t>() <= (1 << 24);
  });
}

std::optional<std::vector<std::string>> JsonReader::strings(const json& j, const std::string& where, const char* key) {
  return list_of<std::string>(*this, find(j, key), where, key, "strings", [](const json& e) { return e.is_string(); });
}

}  // namespace ropegen::hf
