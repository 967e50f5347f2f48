#include "shown_text.h"

#include <fmt/format.h>

namespace ropegen::dsl {

std::string shown(std::string_view text) {
  constexpr size_t kShownChars = 80;
  std::string out;
  for (char c : text.substr(0, kShownChars)) {
    // Control characters (a NUL, a terminal escape) are spelled out, not printed.
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) out += fmt::format("\\x{:02x}", byte);
    else out += c;
  }
  if (text.size() > kShownChars) out += fmt::format("... ({} characters)", text.size());
  return out;
}

}  // namespace ropegen::dsl
