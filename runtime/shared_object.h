// Compiles what one kernel of a spec needs — the variant's rotary entry
// point and, for partial rotary, the pass-through copy (targets/aot's entry
// points and module factory, so AOT libraries and cached kernels are the
// same code) — plus Halide's runtime into a loadable shared object: Halide
// writes the objects, the system C++ compiler links them. Only the kernel's
// symbols (and halide_set_error_handler) are exported: the Halide runtime
// inside stays private to the object, so it cannot bind to, or be bound by,
// any other Halide code in the process.
#pragma once

#include <string>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"
#include "runtime/cache_key.h"

namespace ropegen::runtime {

// C names of a kernel's entry points, from the key (never from the spec's
// name): each has Halide's <name>_argv and <name>_metadata alongside.
struct KernelSymbols {
  std::string prefix;        // ropegen_<key>_: what the object exports
  std::string rope;
  std::string pass_through;  // empty at full rotary
};
KernelSymbols kernel_symbols(const RopeSpec& spec, const CacheKey& key);

// Halide's runtime for `target` as an object file (most of a cold compile:
// the caller keeps it for the next kernel).
std::optional<Diagnostic> compile_runtime_object(const Halide::Target& target, const std::string& path);

// Writes the kernel's objects and the linked kernel.so into `work_dir`
// (which must be private to this compile), linking in `runtime_object`;
// returns the path of kernel.so. The linker is `c++`, or $ROPEGEN_CXX.
Result<std::string> compile_shared_object(const RopeSpec& spec, const lowering::KernelVariant& variant,
                                          const Halide::Target& target, const KernelSymbols& symbols,
                                          const std::string& runtime_object, const std::string& work_dir);

}  // namespace ropegen::runtime
