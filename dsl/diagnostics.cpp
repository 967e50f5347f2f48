#include "ropegen/diagnostics.h"

#include <algorithm>

#include <fmt/format.h>

namespace ropegen {

std::string format(const Diagnostic& d) {
  std::string out;
  if (d.where.line >= 0)
    out = fmt::format("{}:{}:{}: error: {}", d.where.file, d.where.line + 1, d.where.column + 1, d.message);
  else
    out = fmt::format("{}: error: {}", d.where.file, d.message);
  if (!d.source_line.empty() && d.where.column >= 0) {
    // Long lines are shown as a window around the column.
    constexpr int kWidth = 100;
    const int column = std::min(d.where.column, static_cast<int>(d.source_line.size()));
    const int first = std::max(0, column - kWidth / 2);
    std::string line = d.source_line.substr(first, kWidth);
    if (first > 0) line = "..." + line;
    if (first + kWidth < static_cast<int>(d.source_line.size())) line += "...";
    // Other control characters (a NUL, a terminal escape) are not printed.
    for (char& c : line)
      if (c != '\t' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)) c = '?';
    // Tabs are kept so the caret lines up under the same characters.
    std::string pad(first > 0 ? 3 : 0, ' ');
    for (int i = first; i < column; ++i) pad += d.source_line[i] == '\t' ? '\t' : ' ';
    out += fmt::format("\n  {}\n  {}^", line, pad);
  }
  return out;
}

std::string format(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += format(d) + "\n";
  return out;
}

}  // namespace ropegen
