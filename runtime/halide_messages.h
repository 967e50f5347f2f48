// Halide prints compile-time warnings to stderr; for rope-gen's users they
// are noise (e.g. "bfloat16 operation is emulated" on CPUs without native
// bf16, which is expected: bf16 is only converted on load and store). They
// are shown with ROPEGEN_VERBOSE=1. Errors still throw Halide::CompileError.
#pragma once

#include <Halide.h>

namespace ropegen::runtime {

// Idempotent; called before any compilation.
void install_halide_message_filter();

// The same for what a JIT pipeline's runtime prints while it runs (Halide's
// Vulkan runtime reports its allocator settings): shown with
// ROPEGEN_VERBOSE=1. Errors are not prints: they still throw.
void quiet_runtime_prints(Halide::Pipeline& pipeline);

}  // namespace ropegen::runtime
