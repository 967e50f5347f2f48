// The process's shared Halide JIT runtime (one serves every JIT pipeline of
// a target's kind): the functions of it rope-gen calls itself.
#pragma once

#include <Halide.h>

namespace ropegen::runtime {

// The address of the runtime's exported function `name`, or null (no JIT
// pipeline compiled for `target` yet, or no such function).
void* jit_runtime_export(const Halide::Target& target, const char* name);

}  // namespace ropegen::runtime
