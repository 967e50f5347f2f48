// The functions an AOT library exports for a spec, and how each one is
// compiled (algorithm + CPU schedule -> Halide::Module) for one target.
//   <name>_q, <name>_qk            rotate q, or q and k in one call
//   <name>_q_backward, ..._qk_backward   their gradients (rotation by -angle)
//   <name>_apply                   sinusoidal, learned, ALiBi: their one tensor
//   <name>_append[_v][_out_k]      kv_cache specs: rotate q, append k (and v)
//                                  to the caches (and write out_k); no backward
//   ..._i32, ..._i64               explicit-position specs: one per id width
//   <name>_pass_through            partial rotary: copies the other dims (out of place)
#pragma once

#include <string>
#include <vector>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"

namespace ropegen::targets::aot {

struct EntryPoint {
  enum class Kind { Rope, PassThrough };
  std::string name;                 // the C symbol
  Kind kind = Kind::Rope;
  lowering::KernelVariant variant;  // Rope only
  bool explicit_positions = false;  // Rope only: the variant's position width is part of the name
};

std::vector<EntryPoint> entry_points(const RopeSpec& spec);

// What the library's module factory returns for `fn_name` (the entry's own
// name, or it plus a target suffix inside a multi-target library).
Halide::Module compile_entry(const RopeSpec& spec, const EntryPoint& entry, const std::string& fn_name,
                             const Halide::Target& target);

}  // namespace ropegen::targets::aot
