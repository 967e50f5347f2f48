#include "ropegen/spec_io.h"

#include <fstream>
#include <sstream>

#include "schema.h"
#include "spec_builder.h"
#include "yaml_document.h"

namespace ropegen {

Result<RopeSpec> parse_spec(std::string_view yaml_text, const std::string& file) {
  Result<dsl::YamlDocument> doc = dsl::parse_yaml(yaml_text, file);
  if (!doc) return doc.errors();
  if (std::vector<Diagnostic> errors = dsl::check_schema(*doc); !errors.empty()) return errors;
  return dsl::build_spec(*doc);
}

Result<RopeSpec> load_spec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Diagnostic{{path, -1, -1}, "cannot read spec file (does it exist?)", {}};
  std::ostringstream text;
  text << in.rdbuf();
  return parse_spec(text.str(), path);
}

}  // namespace ropegen
