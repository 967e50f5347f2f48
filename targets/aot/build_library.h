// Compiles a spec into an AOT library: every entry point for every CPU
// target (Halide::compile_multitarget: one dispatching function per entry,
// the per-target variants behind it, all built with no_runtime) and for
// each GPU target (<entry>_cuda, <entry>_vulkan: no_runtime, user_context),
// the Halide runtime once (with every GPU API's support) and the call
// library (ropegen_library_run, embedded in rope-gen; with GPU targets,
// the runtime hooks of device_hooks/), merged into ONE archive, plus ropegen_c.h, the generated
// <name>.h, Halide's per-entry headers, HalideRuntime.h and manifest.json.
#pragma once

#include <string>
#include <vector>

#include "ropegen/result.h"
#include "ropegen/spec.h"
#include "targets/aot/aot_targets.h"
#include "targets/aot/object_memo.h"

namespace ropegen::targets::aot {

struct BuiltLibrary {
  std::vector<std::string> files;  // written into the directory; manifest.json last
  int compiled = 0, reused = 0;    // entries (and Halide's runtime) compiled, and taken from the memo
};

// Writes into `dir`, which must exist and be private to this build (a
// staging directory: the caller moves the files into place); intermediate
// objects are removed. With a memo, each entry's objects (and the runtime)
// come from it when it has them, and are kept there when compiled.
Result<BuiltLibrary> build_aot_library(const RopeSpec& spec, const AotTargets& targets, const std::string& dir,
                                       ObjectMemo* memo = nullptr);

}  // namespace ropegen::targets::aot
