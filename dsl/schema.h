// Structural validation of a spec document: which keys exist in which
// section (per frequency scheme / scaling type), their value kinds and
// allowed spellings, required keys. No defaults and no ranges: spec_builder.
#pragma once

#include <vector>

#include "yaml_document.h"

namespace ropegen::dsl {

// Every structural problem in the document; empty when it is well-formed.
std::vector<Diagnostic> check_schema(const YamlDocument& doc);

// Value readers for nodes that check_schema accepted (never throw).
long long as_integer(const YAML::Node& node);
double as_number(const YAML::Node& node);
bool as_boolean(const YAML::Node& node);
std::string as_string(const YAML::Node& node);
std::vector<double> as_number_list(const YAML::Node& node);

}  // namespace ropegen::dsl
