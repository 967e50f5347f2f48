#include "schedule.h"

namespace ropegen::targets {

void schedule_rope(lowering::RopeAlgorithm& algorithm, const RopeSpec& spec, const Halide::Target& target) {
  if (target.has_gpu_feature()) schedule_rope_gpu(algorithm, spec, target);
  else schedule_rope_cpu(algorithm, spec, target);
}

void schedule_pass_through(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target) {
  if (target.has_gpu_feature()) schedule_pass_through_gpu(copy, spec, target);
  else schedule_pass_through_cpu(copy, spec, target);
}

}  // namespace ropegen::targets
