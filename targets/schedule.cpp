#include "schedule.h"

namespace ropegen::targets {

lowering::RopeAlgorithm scheduled_algorithm(const RopeSpec& spec, const lowering::KernelVariant& variant,
                                            const Halide::Target& target) {
  const bool gpu = target.has_gpu_feature();
  lowering::RopeAlgorithm a = lowering::build_algorithm(spec, variant, /*own_cache_stages=*/gpu);
  const RopeSpec laid_out = lowering::kernel_spec(spec, variant);
  if (spec.encoding != Encoding::Rope) {
    if (gpu) schedule_encoding_gpu(a, laid_out, target);
    else schedule_encoding_cpu(a, laid_out, target);
  } else if (gpu) {
    schedule_rope_gpu(a, laid_out, target);
  } else {
    schedule_rope_cpu(a, laid_out, target);
  }
  return a;
}

void schedule_pass_through(lowering::PassThroughCopy& copy, const RopeSpec& spec, const Halide::Target& target) {
  if (target.has_gpu_feature()) schedule_pass_through_gpu(copy, spec, target);
  else schedule_pass_through_cpu(copy, spec, target);
}

}  // namespace ropegen::targets
