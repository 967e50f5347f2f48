// Output files appear whole or not at all: data goes to a temporary file in
// the destination's directory, which is renamed over the target at the end.
// Only regular files are replaced (keeping their mode) or created; an output
// that is a symlink writes the regular file it resolves to, in that file's
// directory (the link stays). Directories, devices, FIFOs, sockets and
// dangling or looping symlinks are refused: rope-gen never replaces a file
// it could not have written.
#pragma once

#include <string>
#include <string_view>

namespace ropegen::cli {

// The file an output named `path` writes: `path` itself, or the target of
// its symlinks. Throws CliError naming `flag` for what cannot be written.
std::string output_destination(const std::string& flag, const std::string& path);

void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace ropegen::cli
