// User text as messages quote it: a long value (a 1 MB name or key) is cut
// to its start and its length, so a message stays short and readable.
#pragma once

#include <string>
#include <string_view>

namespace ropegen::dsl {

std::string shown(std::string_view text);

}  // namespace ropegen::dsl
