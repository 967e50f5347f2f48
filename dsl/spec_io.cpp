#include "ropegen/spec_io.h"

#include <fmt/format.h>

#include "schema.h"
#include "spec_builder.h"
#include "spec_file.h"
#include "yaml_document.h"

namespace ropegen {

Result<RopeSpec> parse_spec(std::string_view yaml_text, const std::string& file, const SpecDefaults& defaults) {
  if (yaml_text.size() > kMaxSpecBytes)
    return Diagnostic{
        {file, -1, -1}, fmt::format("spec is larger than {} bytes (1 MiB), the most rope-gen reads", kMaxSpecBytes), {}};
  Result<dsl::YamlDocument> doc = dsl::parse_yaml(yaml_text, file);
  if (!doc) return doc.errors();
  if (std::vector<Diagnostic> errors = dsl::check_schema(*doc); !errors.empty()) return errors;
  return dsl::build_spec(*doc, defaults);
}

Result<RopeSpec> load_spec(const std::string& path) {
  Result<std::string> text = dsl::read_spec_file(path);
  if (!text) return text.errors();
  return parse_spec(*text, path);
}

}  // namespace ropegen
