// Halide writes objects through LLVM's raw_fd_ostream, which on a write
// error (a full disk) reports a fatal error and exits the process: "LLVM
// ERROR: IO failure on output stream" would end the caller (a Python
// interpreter too). So Halide writes into an anonymous in-memory file
// (memfd) instead, and the object is then copied to its place with checked
// writes: a full disk becomes a diagnostic.
// Guaranteed: LLVM never writes to a file system that can fill up. Not
// covered: running out of memory itself (the object is a few MB), which
// ends in the OOM killer as any allocation would.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "ropegen/diagnostics.h"

namespace ropegen::runtime {

// Calls `produce` with a path that writes into memory, then copies what it
// wrote to the new file `path`. Exceptions from `produce` pass through.
std::optional<Diagnostic> write_through_memory(const std::string& path,
                                               const std::function<void(const std::string& memory_path)>& produce);

}  // namespace ropegen::runtime
