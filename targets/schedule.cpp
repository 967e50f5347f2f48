#include "schedule.h"

namespace ropegen::targets {
namespace {

// dL/d(inv_freq) is a reduction over every row of q and k: computed once, on
// the host (in a GPU pipeline too: a serial loop over rows, which Halide
// 21's Vulkan backend cannot be trusted with), vectorised over pairs, with
// cos/sin recomputed per row by the algorithm's own copies of those stages.
void schedule_frequency_gradient(lowering::RopeAlgorithm& a, const Halide::Target& target) {
  if (!a.d_freqs.defined()) return;
  Halide::Func& sum = a.d_freqs_sum;
  const int lanes = target.natural_vector_size<double>();
  sum.compute_root().vectorize(a.r, lanes, Halide::TailStrategy::GuardWithIf);
  for (int stage = 0; stage < sum.num_update_definitions(); ++stage)
    sum.update(stage).vectorize(a.r, lanes, Halide::TailStrategy::GuardWithIf);
}

}  // namespace

lowering::RopeAlgorithm scheduled_algorithm(const RopeSpec& spec, const lowering::KernelVariant& variant,
                                            const Halide::Target& target) {
  const bool gpu = target.has_gpu_feature();
  lowering::RopeAlgorithm a = lowering::build_algorithm(spec, variant, /*own_cache_stages=*/gpu);
  const RopeSpec laid_out = lowering::kernel_spec(spec, variant);
  schedule_frequency_gradient(a, target);
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
