// Halide prints compile-time warnings to stderr; for rope-gen's users they
// are noise (e.g. "bfloat16 operation is emulated" on CPUs without native
// bf16, which is expected: bf16 is only converted on load and store). The
// CLI hides them (shown with ROPEGEN_VERBOSE=1) by installing this reporter
// for its whole process at start. The library (runtime/, the Python module)
// never installs it: Halide's reporter is process-wide, has no getter (a
// user's own could not be restored) and is not needed for errors, which
// Halide throws as Halide::CompileError itself (the wheel is built with
// exceptions); library users see Halide's warnings as Halide prints them.
#pragma once

#include <Halide.h>

namespace ropegen::runtime {

// Idempotent; for a program's main (tools/rope-gen/main.cpp), never the library.
void install_halide_message_filter();

// The same for what a JIT pipeline's runtime prints while it runs (Halide's
// Vulkan runtime reports its allocator settings): shown with
// ROPEGEN_VERBOSE=1. Errors are not prints: they still throw.
void quiet_runtime_prints(Halide::Pipeline& pipeline);
// The handler it installs, for a JITUserContext of calls into the runtime
// outside a pipeline (device memory: runtime/device_memory.h).
void quiet_runtime_print(Halide::JITUserContext* context, const char* message);

}  // namespace ropegen::runtime
