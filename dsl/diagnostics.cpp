#include "ropegen/diagnostics.h"

#include <fmt/format.h>

namespace ropegen {

std::string format(const Diagnostic& d) {
  std::string out;
  if (d.where.line >= 0)
    out = fmt::format("{}:{}:{}: error: {}", d.where.file, d.where.line + 1, d.where.column + 1, d.message);
  else
    out = fmt::format("{}: error: {}", d.where.file, d.message);
  if (!d.source_line.empty() && d.where.column >= 0) {
    // Tabs are kept so the caret lines up under the same characters.
    std::string pad;
    for (int i = 0; i < d.where.column && i < static_cast<int>(d.source_line.size()); ++i)
      pad += d.source_line[i] == '\t' ? '\t' : ' ';
    out += fmt::format("\n  {}\n  {}^", d.source_line, pad);
  }
  return out;
}

std::string format(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += format(d) + "\n";
  return out;
}

}  // namespace ropegen
