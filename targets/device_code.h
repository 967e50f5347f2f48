// The device code Halide generates for a spec on a GPU target, without
// running it: CUDA PTX text, for offline checks (the tests assemble it
// with ptxas for sm_80 and sm_90) and for inspection.
#pragma once

#include <string>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::targets {

// PTX of the rotary pipeline (or, with pass_through, of the partial-rotary
// copy) for a CUDA target. No driver or device is needed.
Result<std::string> cuda_ptx(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target,
                             bool pass_through = false);

}  // namespace ropegen::targets
