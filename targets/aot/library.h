// What an AOT library holds once compiled: the spec, its targets and each
// entry point's argument list as Halide compiled it. The generated header and
// manifest.json are both written from this, so they cannot disagree with
// the objects in the archive.
#pragma once

#include <string>
#include <vector>

#include <Halide.h>

#include "ropegen/spec.h"
#include "targets/aot/aot_targets.h"
#include "targets/aot/entry_points.h"

namespace ropegen::targets::aot {

struct CompiledEntry {
  EntryPoint entry;
  std::vector<Halide::Argument> arguments;  // call order: inputs, then output buffers (of the CPU function;
                                            // a GPU one takes __user_context first, then the same)
  // Its CUDA function computes something on the host (a frequency table)
  // and copies it to a device buffer of its own at every call: not
  // capturable in a CUDA graph.
  bool cuda_copies_per_call = false;
};

// The C symbol of an entry's function for a device: <name> (CPU: the
// multi-target dispatcher), <name>_cuda, <name>_vulkan (AotTarget::suffix).
inline std::string entry_function(const EntryPoint& e, const AotTarget& target) {
  return target.device == DeviceType::CPU ? e.name : e.name + "_" + target.suffix;
}

struct LibraryDescription {
  RopeSpec spec;
  AotTargets targets;
  Halide::Target runtime_target;
  std::vector<CompiledEntry> entries;
  // Whether the archive holds ropegen_library_run (call/): rope-gen carries
  // that library for its own architecture only; a cross-compiled library's
  // user links call/ built for theirs.
  bool has_call_library = false;
};

inline bool has_device(const LibraryDescription& lib, DeviceType device) { return lib.targets.for_device(device) != nullptr; }

// File names inside the output directory.
inline std::string library_file(const RopeSpec& spec) { return "lib" + spec.name + ".a"; }
inline std::string header_file(const RopeSpec& spec) { return spec.name + ".h"; }
inline std::string entry_header_file(const EntryPoint& e) { return e.name + ".h"; }
inline const char* manifest_file() { return "manifest.json"; }
inline const char* halide_runtime_header_file() { return "HalideRuntime.h"; }
inline const char* c_header_file() { return "ropegen_c.h"; }
inline const char* aot_header_file() { return "ropegen_aot.h"; }
// What a program linking the archive also needs: the call checks are C++
// (libstdc++), Halide's runtime uses threads and dlopen.
inline const char* link_libraries() { return "-lstdc++ -lpthread -ldl -lm"; }

}  // namespace ropegen::targets::aot
