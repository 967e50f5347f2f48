#include "spec_file.h"

#include "regular_file.h"
#include "ropegen/spec_io.h"

namespace ropegen::dsl {

Result<std::string> read_spec_file(const std::string& path) {
  Result<std::string> text = read_regular_file(path, kMaxSpecBytes + 1);  // parse_spec refuses the extra byte
  if (!text) return named_error(path, "cannot read spec file: " + text.errors().front().message);
  return text;
}

}  // namespace ropegen::dsl
