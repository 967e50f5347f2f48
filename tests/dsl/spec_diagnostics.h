// What the DSL tests compare: the first line (location + message) of every
// diagnostic, one per line.
#pragma once

#include <string>

#include "ropegen/diagnostics.h"
#include "ropegen/spec_io.h"

namespace ropegen::test {

inline std::string first_lines(const Result<RopeSpec>& r) {
  if (r.ok()) return "<no error>";
  std::string out;
  for (const Diagnostic& d : r.errors()) {
    const std::string f = format(d);
    out += f.substr(0, f.find('\n')) + "\n";
  }
  return out;
}

inline std::string errors_of(const std::string& text) { return first_lines(parse_spec(text, "s.yaml")); }

}  // namespace ropegen::test
