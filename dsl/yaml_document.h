// The only place yaml-cpp parses text: a tree with source positions, and
// diagnostics that point into the original text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "ropegen/result.h"

namespace ropegen::dsl {

class YamlDocument {
 public:
  YamlDocument(YAML::Node root, std::string file, std::string_view text);

  const YAML::Node& root() const { return root_; }
  Diagnostic error_at(const YAML::Node& node, std::string message) const;
  Diagnostic error_at(int line, int column, std::string message) const;

 private:
  YAML::Node root_;
  std::string file_;
  std::vector<std::string> lines_;
};

Result<YamlDocument> parse_yaml(std::string_view text, const std::string& file);

}  // namespace ropegen::dsl
