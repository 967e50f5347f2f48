#include "schema.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "enums.h"
#include "shown_text.h"

namespace ropegen::dsl {
namespace {

enum class Kind { Integer, Number, Boolean, String, NumberList, IntegerList, Map };

struct Section;

struct KeyRule {
  std::string key;
  Kind kind;
  bool required = false;
  std::vector<std::string> allowed = {};  // for enumerated strings
  const Section* section = nullptr;       // for mappings: the keys they hold
};

// A section whose keys depend on one discriminating key (encoding,
// frequency.scheme, scaling.type); sections without variants have a single
// unnamed variant.
struct Section {
  std::string name;                 // as written in messages: "spec", "frequency", "scaling"
  std::string discriminator;        // "" if none
  std::string default_variant;      // used when the discriminator is absent
  std::vector<KeyRule> common;
  std::vector<std::pair<std::string, std::vector<KeyRule>>> variants;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Integer: return "an integer";
    case Kind::Number: return "a number";
    case Kind::Boolean: return "true or false";
    case Kind::String: return "a string";
    case Kind::NumberList: return "a list of numbers";
    case Kind::IntegerList: return "a list of integers";
    case Kind::Map: return "a mapping";
  }
  return "?";
}

// The spellings of some values of an enum, for keys that allow only those.
template <typename E>
std::vector<std::string> spellings_of(std::initializer_list<E> values) {
  std::vector<std::string> out;
  for (E e : values) out.emplace_back(to_string(e));
  return out;
}

const Section& frequency_section();
const Section& scaling_section();
const Section& xpos_section();
const Section& axes_section();
const Section& kv_cache_section();
const Section& qk_norm_section();
const Section& output_quant_section();

// The encoding decides which keys a spec has; rope rotates heads, the table
// encodings add to rows, so each spells its own layouts.
const Section& top_section() {
  const KeyRule dtype{"dtype", Kind::String, false, spellings<DType>()};
  const KeyRule positions{"positions", Kind::String, false, spellings<PositionsMode>()};
  const KeyRule dim{"dim", Kind::Integer, true};
  const KeyRule row_layout{"layout", Kind::String, false, spellings_of({Layout::BSD, Layout::SBD, Layout::TD})};
  static const Section s{
      "spec",
      "encoding",
      "rope",
      {{"name", Kind::String, true}, {"encoding", Kind::String, false, spellings<Encoding>()}},
      {{"rope",
        {{"head_dim", Kind::Integer, true},
         {"rotary_dim", Kind::Integer},
         {"rotary_offset", Kind::Integer},
         {"pairing", Kind::String, false, spellings<Pairing>()},
         {"output_pairing", Kind::String, false, spellings<Pairing>()},
         {"layout", Kind::String, false, spellings_of({Layout::BSHD, Layout::BHSD, Layout::SBHD, Layout::THD})},
         dtype,
         {"frequency", Kind::Map, false, {}, &frequency_section()},
         {"scaling", Kind::Map, false, {}, &scaling_section()},
         {"xpos", Kind::Map, false, {}, &xpos_section()},
         positions,
         {"axes", Kind::Map, false, {}, &axes_section()},
         {"kv_cache", Kind::Map, false, {}, &kv_cache_section()},
         {"qk_norm", Kind::Map, false, {}, &qk_norm_section()},
         {"output_dtype", Kind::String, false, spellings<KvDType>()},
         {"output_quant", Kind::Map, false, {}, &output_quant_section()},
         {"fp8_scale", Kind::String, false, spellings<Fp8Scale>()}}},
       {"sinusoidal",
        {dim, {"base", Kind::Number}, {"table_form", Kind::String, false, spellings<TableForm>()}, row_layout, dtype,
         positions}},
       {"learned", {dim, row_layout, dtype, positions}},
       {"alibi", {{"num_heads", Kind::Integer, true}, {"form", Kind::String, false, spellings<AlibiForm>()}, dtype}}}};
  return s;
}

const Section& frequency_section() {
  static const Section s{"frequency",
                         "scheme",
                         "lang",
                         {{"scheme", Kind::String, false, spellings<FrequencyScheme>()}},
                         {{"lang", {{"theta", Kind::Number}}},
                          {"pixel", {{"max_freq", Kind::Number}}},
                          {"constant", {{"value", Kind::Number}}},
                          {"custom", {{"values", Kind::NumberList, true}}},
                          {"runtime", {}},
                          {"table", {}}}};
  return s;
}

const Section& scaling_section() {
  const KeyRule factor{"factor", Kind::Number, true};
  const KeyRule original{"original_max_position", Kind::Integer, true};
  const KeyRule attention{"attention_factor", Kind::Number};
  static const Section s{
      "scaling",
      "type",
      "",
      {{"type", Kind::String, true, spellings<ScalingType>()}},
      {{"none", {}},
       {"linear", {factor}},
       {"ntk", {factor}},
       {"dynamic", {factor, original}},
       {"yarn",
        {factor, original, attention, {"beta_fast", Kind::Number}, {"beta_slow", Kind::Number},
         {"mscale", Kind::Number}, {"mscale_all_dim", Kind::Number}, {"truncate", Kind::Boolean}}},
       {"longrope",
        {factor, original, attention, {"short_factor", Kind::NumberList, true},
         {"long_factor", Kind::NumberList, true},
         {"policy", Kind::String, false, spellings<LongRopePolicy>()}}},
       {"llama3",
        {factor, original, {"low_freq_factor", Kind::Number}, {"high_freq_factor", Kind::Number}}}}};
  return s;
}

const Section& xpos_section() {
  static const Section s{"xpos", "", "", {{"scale_base", Kind::Number}}, {}};
  return s;
}

const Section& axes_section() {
  static const Section s{"axes",
                         "",
                         "",
                         {{"sections", Kind::IntegerList, true},
                          {"interleaved", Kind::Boolean},
                          {"per_axis_frequencies", Kind::Boolean}},
                         {}};
  return s;
}

// The fused KV-cache append: the layout decides whether pages have a size.
const Section& kv_cache_section() {
  const KeyRule page_size{"page_size", Kind::Integer};
  const KeyRule dtype{"dtype", Kind::String, false, spellings<KvDType>()};
  const KeyRule scale{"scale", Kind::String, false, {"per_tensor"}};
  static const Section s{"kv_cache",
                         "layout",
                         "paged_nhd",
                         {{"layout", Kind::String, false, spellings<KvLayout>()}},
                         {{"paged_nhd", {page_size, dtype, scale}},
                          {"paged_hnd", {page_size, dtype, scale}},
                          {"contiguous", {dtype, scale}}}};
  return s;
}

// Per-head RMSNorm of q and k before the rotation.
const Section& qk_norm_section() {
  static const Section s{"qk_norm",
                         "",
                         "",
                         {{"type", Kind::String, false, spellings<QkNormType>()},
                          {"eps", Kind::Number, true},
                          {"weight", Kind::String, false, spellings<QkNormWeight>()}},
                         {}};
  return s;
}

// Group quantization of fp8 outputs.
const Section& output_quant_section() {
  static const Section s{"output_quant",
                         "",
                         "",
                         {{"group", Kind::Integer, true}, {"scale", Kind::String, false, spellings<QuantScale>()}},
                         {}};
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  // No key or value is this long; the edit distance would cost |word| * |candidate|.
  constexpr size_t kLongestSpelling = 64;
  if (word.size() > kLongestSpelling) return "";
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best.empty() ? "" : fmt::format("; did you mean `{}`?", best);
}

bool is_quoted(const YAML::Node& n) { return n.Tag() == "!"; }

template <typename T>
bool decodes_as(const YAML::Node& n) {
  T value;
  return n.IsScalar() && !is_quoted(n) && YAML::convert<T>::decode(n, value);
}

bool finite_number(const YAML::Node& n) { return decodes_as<double>(n) && std::isfinite(as_number(n)); }

std::string describe(const YAML::Node& n) {
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  if (n.IsNull()) return "nothing";
  return fmt::format("`{}`", shown(n.Scalar()));
}

bool has_kind(const YAML::Node& n, Kind kind) {
  switch (kind) {
    case Kind::Integer: return decodes_as<long long>(n);
    case Kind::Number: return finite_number(n);
    case Kind::Boolean: return decodes_as<bool>(n);
    case Kind::String: return n.IsScalar();
    case Kind::Map: return n.IsMap();
    case Kind::NumberList:
      return n.IsSequence() && std::all_of(n.begin(), n.end(), [](const YAML::Node& e) { return finite_number(e); });
    case Kind::IntegerList:
      return n.IsSequence() &&
             std::all_of(n.begin(), n.end(), [](const YAML::Node& e) { return decodes_as<long long>(e); });
  }
  return false;
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// How messages name a variant: "frequency scheme `pixel`", "encoding `alibi`".
std::string variant_label(const Section& section, const std::string& variant) {
  const std::string prefix = section.name == "spec" ? "" : section.name + " ";
  return fmt::format("{}{} `{}`", prefix, section.discriminator, variant);
}

class SchemaChecker {
 public:
  explicit SchemaChecker(const YamlDocument& doc) : doc_(doc) {}

  std::vector<Diagnostic> run() {
    const YAML::Node& root = doc_.root();
    if (!root.IsMap()) {
      errors_.push_back(doc_.error_at(root, "a spec must be a YAML mapping of keys such as `name:` and `head_dim:`"));
      return errors_;
    }
    check_section(root, top_section());
    return errors_;
  }

 private:
  void check_section(const YAML::Node& map, const Section& section) {
    std::string variant = section.default_variant;
    if (!section.discriminator.empty()) {
      const YAML::Node d = map[section.discriminator];
      variant = d && d.IsScalar() ? d.Scalar() : section.default_variant;
    }
    const std::vector<KeyRule>* variant_rules = nullptr;
    for (const auto& [v, rules] : section.variants)
      if (v == variant) variant_rules = &rules;

    std::vector<const KeyRule*> rules;
    for (const auto& r : section.common) rules.push_back(&r);
    if (variant_rules)
      for (const auto& r : *variant_rules) rules.push_back(&r);

    std::set<std::string> seen;
    for (const auto& entry : map) {
      const YAML::Node& key = entry.first;
      const std::string name = key.IsScalar() ? key.Scalar() : "";
      if (!seen.insert(name).second) {
        errors_.push_back(doc_.error_at(key, fmt::format("duplicate key `{}` in {}", shown(name), section.name)));
        continue;
      }
      auto rule = std::find_if(rules.begin(), rules.end(), [&](const KeyRule* r) { return r->key == name; });
      if (rule == rules.end()) {
        // Without a valid scheme/type, keys of any variant are given the benefit of the doubt.
        if (!variant_rules && !section.discriminator.empty() && belongs_to_some_variant(name, section)) continue;
        errors_.push_back(doc_.error_at(key, unknown_key_message(name, section, variant, variant_rules != nullptr)));
        continue;
      }
      check_value(entry.second, **rule, section, variant);
    }
    // A section whose variant is unknown already has an error on its discriminator.
    if (!section.discriminator.empty() && !variant_rules && !variant.empty()) return;
    for (const KeyRule* r : rules)
      if (r->required && !map[r->key]) errors_.push_back(doc_.error_at(map, missing_key_message(*r, section, variant)));
  }

  void check_value(const YAML::Node& value, const KeyRule& rule, const Section& section, const std::string& variant) {
    if (!has_kind(value, rule.kind)) {
      std::string extra = rule.kind == Kind::Number || rule.kind == Kind::NumberList ? " (finite, unquoted)" : "";
      if ((rule.kind == Kind::Integer || rule.kind == Kind::Number) && value.IsScalar() && is_quoted(value))
        extra = " (remove the quotes)";
      errors_.push_back(doc_.error_at(value, fmt::format("`{}` must be {}{}, got {}", rule.key, kind_name(rule.kind),
                                                         extra, describe(value))));
      return;
    }
    if (!rule.allowed.empty() && !contains(rule.allowed, value.Scalar()))
      errors_.push_back(doc_.error_at(value, unknown_value_message(value.Scalar(), rule, section, variant)));
    if (rule.section) check_section(value, *rule.section);
  }

  static bool belongs_to_some_variant(const std::string& key, const Section& section) {
    for (const auto& [v, rules] : section.variants)
      for (const auto& r : rules)
        if (r.key == key) return true;
    return false;
  }

  static bool is_common(const KeyRule& rule, const Section& section) {
    return std::any_of(section.common.begin(), section.common.end(),
                       [&](const KeyRule& r) { return r.key == rule.key; });
  }

  std::string missing_key_message(const KeyRule& rule, const Section& section, const std::string& variant) const {
    if (!variant.empty() && !is_common(rule, section))
      return fmt::format("{} needs `{}`", variant_label(section, variant), rule.key);
    if (section.name == "spec") return fmt::format("missing required key `{}`", rule.key);
    return fmt::format("{} needs `{}`", section.name, rule.key);
  }

  // A spelling that another variant allows (a rope layout in a sinusoidal
  // spec) gets a precise explanation.
  std::string unknown_value_message(const std::string& value, const KeyRule& rule, const Section& section,
                                    const std::string& variant) const {
    std::vector<std::string> owners;
    for (const auto& [v, rules] : section.variants)
      for (const auto& r : rules)
        if (r.key == rule.key && contains(r.allowed, value)) owners.push_back(v);
    if (!owners.empty())
      return fmt::format("{} `{}` does not belong to {}; it is used by {} {}; allowed: {}", rule.key, value,
                         variant_label(section, variant), section.discriminator, fmt::join(owners, ", "),
                         fmt::join(rule.allowed, ", "));
    return fmt::format("unknown {} `{}`; allowed: {}{}", rule.key, shown(value), fmt::join(rule.allowed, ", "),
                       did_you_mean(value, rule.allowed));
  }

  std::string unknown_key_message(const std::string& key, const Section& section, const std::string& variant,
                                  bool variant_known) const {
    // A key that is valid for another encoding/scheme/type gets a precise explanation.
    std::vector<std::string> owners;
    std::vector<std::string> all_keys;
    for (const auto& r : section.common) all_keys.push_back(r.key);
    for (const auto& [v, rules] : section.variants)
      for (const auto& r : rules) {
        all_keys.push_back(r.key);
        if (r.key == key) owners.push_back(v);
      }
    if (!owners.empty() && variant_known)
      return fmt::format("`{}` does not belong to {}; it is used by {} {}", key, variant_label(section, variant),
                         section.discriminator, fmt::join(owners, ", "));
    std::sort(all_keys.begin(), all_keys.end());
    all_keys.erase(std::unique(all_keys.begin(), all_keys.end()), all_keys.end());
    std::vector<std::string> here;
    for (const auto& r : section.common) here.push_back(r.key);
    for (const auto& [v, rules] : section.variants)
      if (v == variant)
        for (const auto& r : rules) here.push_back(r.key);
    const std::string where = section.name == "spec" ? "for " + variant_label(section, variant) : "in " + section.name;
    // A near key that is valid here is the likelier meaning than one of another variant.
    std::string suggestion = did_you_mean(key, here);
    if (suggestion.empty()) suggestion = did_you_mean(key, all_keys);
    return fmt::format("unknown key `{}` {}; allowed: {}{}", shown(key), where, fmt::join(here, ", "), suggestion);
  }

  const YamlDocument& doc_;
  std::vector<Diagnostic> errors_;
};

void list_keys(const Section& section, const std::string& prefix, std::vector<SchemaKey>& out) {
  auto add = [&](const KeyRule& rule, const std::string& variant) {
    out.push_back({prefix + rule.key, variant, kind_name(rule.kind), rule.required, rule.allowed});
    if (rule.section) list_keys(*rule.section, prefix + rule.key + ".", out);
  };
  for (const KeyRule& rule : section.common) add(rule, "");
  for (const auto& [variant, rules] : section.variants)
    for (const KeyRule& rule : rules) add(rule, variant);
}

}  // namespace

std::vector<Diagnostic> check_schema(const YamlDocument& doc) { return SchemaChecker(doc).run(); }

std::vector<SchemaKey> schema_keys() {
  std::vector<SchemaKey> keys;
  list_keys(top_section(), "", keys);
  return keys;
}

long long as_integer(const YAML::Node& node) {
  long long v = 0;
  YAML::convert<long long>::decode(node, v);
  return v;
}
double as_number(const YAML::Node& node) {
  double v = 0;
  YAML::convert<double>::decode(node, v);
  return v;
}
bool as_boolean(const YAML::Node& node) {
  bool v = false;
  YAML::convert<bool>::decode(node, v);
  return v;
}
std::string as_string(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : std::string(); }
std::vector<double> as_number_list(const YAML::Node& node) {
  std::vector<double> out;
  for (const auto& e : node) out.push_back(as_number(e));
  return out;
}

}  // namespace ropegen::dsl
