#include "schedule.h"

namespace ropegen::targets {

void schedule_rope(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target) {
  // GPU families (CUDA, Vulkan) come with their own schedules.
  schedule_rope_cpu(algorithm, spec, target);
}

void schedule_pass_through(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target) {
  schedule_pass_through_cpu(copy, spec, target);
}

}  // namespace ropegen::targets
