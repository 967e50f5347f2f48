// Reading a spec file: only regular files, and at most one byte more than
// kMaxSpecBytes (parse_spec refuses anything larger), so /dev/zero, a FIFO
// without a writer or a directory give a diagnostic, not an endless read,
// a hang or a confusing parse error.
#pragma once

#include <string>

#include "ropegen/result.h"

namespace ropegen::dsl {

Result<std::string> read_spec_file(const std::string& path);

}  // namespace ropegen::dsl
