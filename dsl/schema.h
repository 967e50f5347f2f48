// Structural validation of a spec document: which keys exist in which
// section (per frequency scheme / scaling type), their value kinds and
// allowed spellings, required keys. No defaults and no ranges: spec_builder.
#pragma once

#include <string>
#include <vector>

#include "yaml_document.h"

namespace ropegen::dsl {

// Every structural problem in the document; empty when it is well-formed.
std::vector<Diagnostic> check_schema(const YamlDocument& doc);

// One key the schema allows, in one variant of its section: what
// docs/spec.md's key table must list (tests/dsl/spec_doc_test.cpp).
struct SchemaKey {
  std::string path;                  // the mappings above, then the key: "frequency.theta"
  std::string variant;               // the section's encoding/scheme/type/layout that has it; "" in every one
  std::string kind;                  // as messages say it: "an integer", "a list of numbers", ...
  bool required = false;
  std::vector<std::string> allowed;  // an enumerated string's spellings
};

// Every key of every section, in the table's order.
std::vector<SchemaKey> schema_keys();

// Value readers for nodes that check_schema accepted (never throw).
long long as_integer(const YAML::Node& node);
double as_number(const YAML::Node& node);
bool as_boolean(const YAML::Node& node);
std::string as_string(const YAML::Node& node);
std::vector<double> as_number_list(const YAML::Node& node);

}  // namespace ropegen::dsl
