// Reading a user's file without surprises, for every parser of user files
// (specs, HF configs): only regular files, opened without blocking (a FIFO
// without a writer), and never more than a bound, so /dev/zero, a FIFO or a
// directory give a reason instead of an endless read or a hang.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "base/file_write.h"
#include "ropegen/result.h"

namespace ropegen::dsl {

// What a file that is not a regular one is, for messages: "a directory", "a FIFO (named pipe)", ...
using base::file_kind;

// At most `limit` bytes of the regular file at `path` (a caller that must
// refuse larger files asks for one byte more than it accepts). The error's
// message is the reason alone ("it is a directory", strerror's text): callers
// say what they were reading.
Result<std::string> read_regular_file(const std::string& path, size_t limit);

}  // namespace ropegen::dsl
