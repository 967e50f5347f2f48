// The code Halide generates for a spec, without running it: CUDA PTX text,
// for offline checks (the tests assemble it with ptxas for sm_80 and
// sm_90), and the lowered statement of a pipeline or the assembly of a CPU
// one, for checks of the schedule's shape and for inspection.
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

// Halide's lowered statement (text) of the rotary pipeline for any target
// (for a GPU target: the host code around its kernel launches), or its
// assembly for a CPU target (any, not only the host's).
enum class PipelineCode { LoweredStmt, Assembly };
Result<std::string> pipeline_code(const RopeSpec& spec, const lowering::KernelVariant& variant,
                                  const Halide::Target& target, PipelineCode kind);

}  // namespace ropegen::targets
