// DIR/<name>.h: the C interface of an AOT library. A friendly static-inline
// call, <name>_rope(), takes the caller's raw pointers, shapes and strides in
// the spec's layout, builds the halide_buffer_t views the kernels take
// (tensor_view.cpp's views, in C) and calls the right entry point. Plain
// C99 and C++; needs only HalideRuntime.h and the per-entry headers next to it.
// <name>_rope_backward() is its gradient. Specs the call does not cover
// (other encodings, multi-axis, run-time frequencies) get a header that
// documents the entry points' arguments instead.
#pragma once

#include <string>

#include "targets/aot/library.h"

namespace ropegen::targets::aot {

std::string c_header(const LibraryDescription& library);

// The declaration of <name>_rope() (or <name>_rope_backward()), as in the
// header (also in manifest.json).
std::string rope_function_declaration(const RopeSpec& spec, bool backward = false);

// Why a spec's header has no convenience call (the other encodings,
// multi-axis, run-time frequencies); empty when it has one.
std::string no_convenience_call(const RopeSpec& spec);

}  // namespace ropegen::targets::aot
