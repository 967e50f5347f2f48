#include "hf_json.h"

#include <sys/stat.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "dsl/regular_file.h"

namespace ropegen::hf {
namespace {

using json = nlohmann::json;

Diagnostic diagnostic(const std::string& file, std::string message) { return {{file, -1, -1}, std::move(message), {}}; }

// Where a scan of JSON text is: inside a string literal or not.
struct JsonStrings {
  bool in_string = false, escaped = false;
  // Steps over `ch`; true when it is outside every string and no quote.
  bool outside(char ch) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      return false;
    }
    if (ch == '"') in_string = true;
    return !in_string;
  }
};

// The deepest nesting of [ and { outside strings, stopping once past `limit`.
int nesting_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  JsonStrings strings;
  for (char ch : text) {
    if (!strings.outside(ch)) continue;
    if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}

// Python's json (HF's loader) writes and reads the non-finite literals NaN, Infinity and -Infinity, which JSON
// lacks, and reads a number too large for a double (1e999) as infinity. Outside strings, valid JSON has no other
// bare word starting with N, I or -I, so each is swapped for a string of the marker and the literal: the parse
// keeps them as values, a key rope-gen never reads ignores them, and a key it reads refuses them by name (the
// typed look-ups below). The marker starts with NUL, which a JSON string can only hold escaped.
constexpr const char* kMarkerWord = "non-finite ";
const std::string kNonFinite = std::string(1, '\0') + kMarkerWord;

std::string non_finite_string(const char* literal) {
  return std::string("\"\\u0000") + kMarkerWord + literal + "\"";
}

// The non-finite literal at text[i], or nullptr.
const char* literal_at(const std::string& text, size_t i) {
  for (const char* literal : {"NaN", "Infinity", "-Infinity"})
    if (text.compare(i, std::strlen(literal), literal) == 0) return literal;
  return nullptr;
}

// The end of the number token starting at i (JSON's characters of numbers).
size_t number_end(const std::string& text, size_t i) {
  while (i < text.size() && std::strchr("+-0123456789.eE", text[i]) != nullptr) ++i;
  return i;
}

// Whether a number from_chars found out of a double's range is too large (else too small: Python reads 0).
bool too_large(const std::string& token) {
  const size_t e = token.find_first_of("eE");
  const std::string mantissa = token.substr(0, e);
  const long exponent = e == std::string::npos ? 0 : std::strtol(token.c_str() + e + 1, nullptr, 10);
  const long point = static_cast<long>(std::min(mantissa.find('.'), mantissa.size()));
  const size_t first = mantissa.find_first_of("123456789");
  if (first == std::string::npos) return false;
  // the decimal exponent of the first significant digit
  const long magnitude = static_cast<long>(first) < point ? point - static_cast<long>(first) - 1
                                                          : point - static_cast<long>(first);
  return magnitude + exponent > 0;
}

std::string with_non_finite_as_strings(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  JsonStrings strings;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (!strings.outside(ch)) {
      out += ch;
      continue;
    }
    if (const char* literal = literal_at(text, i)) {
      out += non_finite_string(literal);
      i += std::strlen(literal) - 1;
      continue;
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
      const size_t end = number_end(text, i);
      double v = 0;
      const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + end, v);
      if (ec == std::errc::result_out_of_range && ptr == text.data() + end && too_large(text.substr(i, end - i)))
        out += non_finite_string(ch == '-' ? "-Infinity" : "Infinity");
      else
        out.append(text, i, end - i);
      i = end - 1;
      continue;
    }
    out += ch;
  }
  return out;
}

// The literal a swapped value stood for, or empty.
std::string non_finite_literal(const json& v) {
  if (!v.is_string()) return "";
  const std::string& s = v.get_ref<const std::string&>();
  return s.compare(0, kNonFinite.size(), kNonFinite) == 0 ? s.substr(kNonFinite.size()) : "";
}

// A short rendering of a JSON value for messages.
std::string shown(const json& v) {
  if (std::string literal = non_finite_literal(v); !literal.empty()) return literal;
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

}  // namespace

Result<json> parse_hf_config(const std::string& text, const std::string& file) {
  if (nesting_depth(text, kMaxHfConfigDepth) > kMaxHfConfigDepth)
    return diagnostic(file, fmt::format("JSON nested deeper than {} levels; a model config is not", kMaxHfConfigDepth));
  json config = json::parse(with_non_finite_as_strings(text), nullptr, /*allow_exceptions=*/false);
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
  if (!v->is_string() || !non_finite_literal(*v).empty()) {
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
  return list_of<std::string>(*this, find(j, key), where, key, "strings",
                              [](const json& e) { return e.is_string() && non_finite_literal(e).empty(); });
}

}  // namespace ropegen::hf
