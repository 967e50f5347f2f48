// Schedules: how an algorithm runs on a target. One schedule per target
// family (and per kind of algorithm: rope's rotation, the other encodings'
// element-wise update); questions about the target are small named functions.
#pragma once

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"

namespace ropegen::targets {

// The spec's algorithm (lowering::build_algorithm), scheduled for `target`.
lowering::RopeAlgorithm scheduled_algorithm(const RopeSpec& spec, const lowering::KernelVariant& variant,
                                            const Halide::Target& target);
void schedule_pass_through(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target);

// The CPU family (x86 SSE/AVX/AVX-512, ARM NEON).
void schedule_rope_cpu(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target);
void schedule_pass_through_cpu(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target);
void schedule_encoding_cpu(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target);

// The GPU family (CUDA, Vulkan): targets with a GPU feature.
void schedule_rope_gpu(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target);
void schedule_pass_through_gpu(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target);
void schedule_encoding_gpu(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target);

}  // namespace ropegen::targets
