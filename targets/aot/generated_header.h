// DIR/<name>.h, the small generated part of an AOT library's C interface:
// the spec's constants, the entry points' declarations, the
// ropegen_library that describes them (the contract from
// call::call_contract) and one function, <name>_run(), that passes a
// ropegen_call to ropegen_library_run. Everything else (the tensor and call
// structs, status codes) is the fixed ropegen_c.h next to it. C99 and C++;
// needs no Halide header. The same header for every encoding.
#pragma once

#include <string>

#include "targets/aot/library.h"

namespace ropegen::targets::aot {

std::string generated_header(const LibraryDescription& library);

// The C entry's name, `<name>_run` (also in manifest.json).
std::string run_function(const RopeSpec& spec);

}  // namespace ropegen::targets::aot
