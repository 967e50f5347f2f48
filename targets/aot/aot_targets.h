// The target list of an AOT library (`rope-gen build --targets ...`): one
// architecture, several feature levels, picked at run time by Halide's
// multi-target dispatch. The last target is the baseline: it is called
// whenever no earlier one can run on the machine, so it must run everywhere
// the library is meant to.
#pragma once

#include <string>
#include <vector>

#include <Halide.h>

#include "ropegen/result.h"

namespace ropegen::targets::aot {

struct AotTarget {
  Halide::Target target;  // as compiled: with no_runtime (the runtime is emitted once, separately)
  std::string suffix;     // names this target's objects and sub-functions, e.g. x86_64_linux_avx2_fma_f16c_sse41
};

// "host,..." or Halide target strings, comma-separated. On x86-64, `host`
// means the dispatch set avx512_skylake, avx2, sse41, baseline x86-64.
// Errors: unknown or GPU targets (GPU kernels run JIT: runtime/device_call.h),
// mixed architectures/OS/bits, duplicates,
// features that would change the C calling convention.
Result<std::vector<AotTarget>> parse_aot_targets(const std::string& list);

// The target of the Halide runtime object: only the features every target
// in the list has, so it runs wherever the baseline does.
Halide::Target runtime_target(const std::vector<AotTarget>& targets);

// "x86-64" or "arm-64" (what manifest.json and error messages call it).
std::string architecture_name(const Halide::Target& target);

}  // namespace ropegen::targets::aot
