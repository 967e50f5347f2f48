// User-facing errors: positions are stored 0-based and printed 1-based,
// `FILE:LINE:COL: error: message`, then the source line and a caret.
#pragma once

#include <string>
#include <vector>

namespace ropegen {

struct SourceLocation {
  std::string file;
  int line = -1;    // 0-based; -1 when the error has no position (e.g. a missing file)
  int column = -1;  // 0-based
};

struct Diagnostic {
  SourceLocation where;
  std::string message;
  std::string source_line;  // the offending line of the input, if known
};

// A diagnostic about something named rather than a place in a file: a call
// argument ("k"), a flag ("--targets"), a path, "target".
inline Diagnostic named_error(std::string what, std::string message) {
  return Diagnostic{{std::move(what), -1, -1}, std::move(message), {}};
}

// One diagnostic, formatted for a terminal (no trailing newline).
std::string format(const Diagnostic& d);
// All of them, one after the other, each ending in a newline.
std::string format(const std::vector<Diagnostic>& ds);

}  // namespace ropegen
