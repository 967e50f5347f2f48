// Schedules: how a RopeAlgorithm runs on a target. One schedule per target
// family; questions about the target are small named functions.
#pragma once

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"

namespace ropegen::targets {

void schedule_rope(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target);
void schedule_pass_through(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target);

// The CPU family (x86 SSE/AVX/AVX-512, ARM NEON).
void schedule_rope_cpu(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target);
void schedule_pass_through_cpu(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target);

// The GPU family (CUDA, Vulkan): targets with a GPU feature.
void schedule_rope_gpu(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target);
void schedule_pass_through_gpu(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target);

}  // namespace ropegen::targets
