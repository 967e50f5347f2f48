#include "jit_kernel.h"

#include "targets/schedule.h"

namespace ropegen::runtime {

JitKernel::JitKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target)
    : spec_(spec),
      algorithm_(std::make_unique<lowering::RopeAlgorithm>(lowering::build_rope_algorithm(spec, variant))),
      target_(target) {
  targets::schedule_rope(*algorithm_, spec, target);
  pipeline_ = Halide::Pipeline(algorithm_->outputs());
  pipeline_.compile_jit(target);
}

void JitKernel::run(const RopeCall& call) {
  lowering::RopeAlgorithm& a = *algorithm_;
  a.q.input.set(call.q);
  if (a.variant.with_k) a.k.input.set(call.k);
  if (a.uses_positions) a.positions.set(call.positions);
  if (a.uses_cu_seqlens) a.cu_seqlens.set(call.cu_seqlens);
  a.offset.set(call.offset);
  a.seq_len.set(call.seq_len);
  if (a.variant.with_k) pipeline_.realize(Halide::Realization({call.out_q, call.out_k}), target_);
  else pipeline_.realize(Halide::Realization({call.out_q}), target_);
}

}  // namespace ropegen::runtime
