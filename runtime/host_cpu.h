// Whether this machine's CPU can run code compiled for a target: the same
// architecture, bits and OS as Halide::get_host_target(), and every CPU
// feature the target names. JIT code for another CPU crashes the process
// (SIGSEGV, SIGILL), so every path that runs kernels (ropegen::Runtime::get)
// asks this first; `rope-gen build` cross-compiles and does not.
#pragma once

#include <optional>

#include <Halide.h>

#include "ropegen/diagnostics.h"

namespace ropegen::runtime {

// What this CPU lacks to run `target` (a diagnostic naming it), or nothing.
std::optional<Diagnostic> host_cpu_cannot_run(const Halide::Target& target);

}  // namespace ropegen::runtime
