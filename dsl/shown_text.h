// User text as messages quote it: a long value (a 1 MB name or key) is cut
// to its start and its length, control characters are written as \xNN, so a
// message stays short, readable and harmless to a terminal.
#pragma once

#include <string>
#include <string_view>

namespace ropegen::dsl {

std::string shown(std::string_view text);

}  // namespace ropegen::dsl
