#include "shown_text.h"

#include <fmt/format.h>

namespace ropegen::dsl {

std::string shown(std::string_view text) {
  constexpr size_t kShownChars = 80;
  if (text.size() <= kShownChars) return std::string(text);
  return fmt::format("{}... ({} characters)", text.substr(0, kShownChars), text.size());
}

}  // namespace ropegen::dsl
