// DIR/manifest.json: what a built library holds, for tools and people: the
// spec (hash and normalised text), the targets in dispatch order, the
// Halide version, and every entry point with its arguments in call order,
// their element types and shapes (dims named as in lowering/rope_algorithm.h).
#pragma once

#include <string>

#include "targets/aot/library.h"

namespace ropegen::targets::aot {

std::string manifest_json(const LibraryDescription& library);

}  // namespace ropegen::targets::aot
