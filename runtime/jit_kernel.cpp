#include "jit_kernel.h"

#include <stdexcept>

#include "runtime/halide_messages.h"
#include "runtime/tensor_view.h"
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

void JitKernel::copy_pass_through(const Halide::Buffer<>& in, const Halide::Buffer<>& out) {
  if (!pass_through_ || in.data() == out.data()) return;  // in place: nothing to copy
  const int first_after = spec_.rotary_offset + spec_.rotary_dim;
  for (auto [first, count] : {std::pair{0, spec_.rotary_offset}, std::pair{first_after, spec_.head_dim - first_after}}) {
    if (count == 0) continue;
    pass_through_->input.set(dim_range_view(in, first, count));
    pass_through_pipeline_.realize(Halide::Realization({dim_range_view(out, first, count)}), target_);
  }
}

void JitKernel::run(const RopeCall& call) {
  lowering::RopeAlgorithm& a = *algorithm_;
  // Writing a pair elsewhere than it was read would overwrite other pairs' inputs.
  if (spec_.output_pairing != spec_.pairing && (call.q.data() == call.out_q.data() || (call.k.data() && call.k.data() == call.out_k.data())))
    throw std::invalid_argument("a spec whose output_pairing differs from its pairing cannot run in place");
  a.q.input.set(call.q);
  if (a.variant.with_k) a.k.input.set(call.k);
  if (a.uses_positions) a.positions.set(call.positions);
  if (a.uses_cu_seqlens) a.cu_seqlens.set(call.cu_seqlens);
  a.offset.set(call.offset);
  a.seq_len.set(call.seq_len);
  if (a.variant.with_k)
    pipeline_.realize(Halide::Realization({rotary_view(call.out_q, spec_), rotary_view(call.out_k, spec_)}), target_);
  else
    pipeline_.realize(Halide::Realization({rotary_view(call.out_q, spec_)}), target_);
  copy_pass_through(call.q, call.out_q);
  if (a.variant.with_k) copy_pass_through(call.k, call.out_k);
}

}  // namespace ropegen::runtime
