// Output files appear whole or not at all: data goes to a temporary file in
// the destination's directory, which is renamed over the target at the end.
#pragma once

#include <string>
#include <string_view>

namespace ropegen::cli {

void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace ropegen::cli
