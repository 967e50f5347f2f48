// One AOT library of the kit (libs/<spec hash>.so: `rope-gen build` of the
// spec for the host and CUDA, linked into a shared object that exports only
// kit_run, which is the library's <name>_run). Loaded once, kept loaded.
#pragma once

#include <string>

#include "ropegen_c.h"

namespace kit {

using RunFn = int (*)(const ropegen_call*, ropegen_message*);

// libs/<spec>.so of the kit in `dir` (throws std::runtime_error saying why not).
RunFn load_library(const std::string& dir, const std::string& spec);

}  // namespace kit
