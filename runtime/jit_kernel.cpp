#include "jit_kernel.h"

#include <stdexcept>

#include "runtime/call_binding.h"
#include "runtime/halide_messages.h"
#include "targets/schedule.h"

namespace ropegen::runtime {

JitKernel::JitKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target)
    : spec_(spec),
      algorithm_(std::make_unique<lowering::RopeAlgorithm>(lowering::build_rope_algorithm(spec, variant))),
      target_(target) {
  install_halide_message_filter();
  targets::schedule_rope(*algorithm_, spec, target);
  pipeline_ = Halide::Pipeline(algorithm_->outputs());
  pipeline_.compile_jit(target);
  if (spec.rotary_dim < spec.head_dim) {
    pass_through_ = std::make_unique<lowering::PassThroughCopy>(lowering::build_pass_through_copy(spec));
    targets::schedule_pass_through(*pass_through_, spec, target);
    pass_through_pipeline_ = Halide::Pipeline(pass_through_->output);
    pass_through_pipeline_.compile_jit(target);
  }
}

void JitKernel::run(const RopeCall& call) {
  lowering::RopeAlgorithm& a = *algorithm_;
  const BoundCall bound = bind_call(spec_, a.variant, call);
  a.q.input.set(bound.rope.q);
  if (a.variant.with_k) a.k.input.set(bound.rope.k);
  if (a.uses_positions) a.positions.set(bound.rope.positions);
  if (a.uses_cu_seqlens) a.cu_seqlens.set(bound.rope.cu_seqlens);
  a.offset.set(bound.rope.offset);
  a.seq_len.set(bound.rope.seq_len);
  pipeline_.realize(Halide::Realization(bound.rope.outputs()), target_);
  for (const PassThroughArguments& copy : bound.pass_through) {
    pass_through_->input.set(copy.in);
    pass_through_pipeline_.realize(Halide::Realization({copy.out}), target_);
  }
}

}  // namespace ropegen::runtime
