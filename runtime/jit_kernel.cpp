#include "jit_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "abi/arguments.h"
#include "call/contract.h"
#include "call/device_views.h"
#include "call/parts.h"
#include "runtime/cuda_context.h"
#include "runtime/device_call.h"
#include "runtime/device_memory.h"
#include "runtime/fork_guard.h"
#include "runtime/halide_messages.h"
#include "runtime/jit_runtime.h"
#include "targets/schedule.h"

namespace ropegen::runtime {
JitKernel::JitKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target)
    : spec_(lowering::kernel_spec(spec, variant)),
      contract_(call::call_contract(spec_)),
      target_(with_device_version(target)) {  // GPU targets: for the device's capability / version
  prepare_device_runtime(target_);
  algorithm_ = std::make_unique<lowering::RopeAlgorithm>(targets::scheduled_algorithm(spec, variant, target_));
  pipeline_ = Halide::Pipeline(algorithm_->outputs());
  quiet_runtime_prints(pipeline_);
  pipeline_.compile_jit(target_);
  if (spec.has_pass_through()) {
    pass_through_ = std::make_unique<lowering::PassThroughCopy>(lowering::build_pass_through_copy(spec));
    targets::schedule_pass_through(*pass_through_, spec, target_);
    pass_through_pipeline_ = Halide::Pipeline(pass_through_->output);
    quiet_runtime_prints(pass_through_pipeline_);
    pass_through_pipeline_.compile_jit(target_);
  }
  if (target_.has_gpu_feature())
    device_interface_ = Halide::get_device_interface_for_device_api(Halide::get_default_device_api_for_target(target_),
                                                                     target_);
  guard_jit_thread_pool(target_);
  if (!target_.has_gpu_feature())
    pool_threads_ = reinterpret_cast<int (*)()>(jit_runtime_export(target_, "halide_get_num_threads"));
}

void JitKernel::run(const call::PreparedCall& call) {
  try {
    if (call.on_device()) return run_on_device_memory(call);
    // CUDA: in device 0's primary context, on the legacy default stream (runtime/cuda_context.h).
    std::optional<CudaCallContext> cuda;
    if (target_.has_feature(Halide::Target::CUDA)) cuda.emplace(primary_context(0), nullptr);
    Halide::JITUserContext* context = cuda ? &*cuda : nullptr;
    if (target_.has_gpu_feature()) {
      // Staged through dense device buffers (runtime/device_call.h).
      return run_staged(call, spec_, algorithm_->variant, target_,
                        {[&](const PipelineArguments& a) { realize(a, context); },
                         [&](const PipelineCopy& c) { realize(c, context); }, context});
    }
    call::run_in_parts(call, nullptr, [&](const call::PartViews& part) { run_part(part, context); });
  } catch (const Halide::RuntimeError& e) {
    throw KernelFailure(e.what());
  }
}

void JitKernel::run_on_device_memory(const call::PreparedCall& call) {
  const bool cuda = target_.has_feature(Halide::Target::CUDA), vulkan = target_.has_feature(Halide::Target::Vulkan);
  if (!(cuda && call.device.type == DeviceType::CUDA) && !(vulkan && call.device.type == DeviceType::Vulkan))
    throw KernelFailure(device_mismatch(call, target_.to_string()));
  if (algorithm_->uses(abi::Arg::SeqLen) && !call.seq_len_known)
    throw KernelFailure("this spec's frequencies depend on seq_len (dynamic NTK scaling, or LongRoPE's per-call "
                        "choice): a device call passes seq_len, since its positions are not read on the host");
  const Result<DeviceInfo> device = probe_device(target_);
  if (!device) throw DeviceError(format(device.errors()));
  std::optional<CudaCallContext> cuda_context;
  if (cuda) cuda_context.emplace(primary_context(call.device.id), call.stream);
  Halide::JITUserContext* context = cuda_context ? &*cuda_context : nullptr;
  call::run_in_parts(call, device_interface_, [&](const call::PartViews& part) {
    call::BoundPart bound = call::bind_part(contract_, algorithm_->variant, part);
    std::optional<VulkanViews> views;
    if (vulkan) {
      views.emplace(device->offset_alignment);
      call::for_each_view(bound, contract_, [&](call::RawBuffer& view, const std::string& name) { views->bind(view, name); });
    } else if (const std::optional<std::string> misaligned = call::cuda_misalignment(bound, contract_)) {
      throw KernelFailure(*misaligned);
    }
    realize(wrap(bound.rope), context);
    for (const call::PassThroughArguments& copy : bound.pass_through) realize(wrap(copy), context);
  });
}

void JitKernel::run_part(const call::PartViews& part, Halide::JITUserContext* context) {
  const call::BoundPart bound = call::bind_part(contract_, algorithm_->variant, part);
  realize(wrap(bound.rope), context);
  for (const call::PassThroughArguments& copy : bound.pass_through) realize(wrap(copy), context);
}

// The used arguments bound by the table (abi/arguments.h), pool_threads
// from the runtime that runs the kernel.
void JitKernel::realize(const PipelineArguments& args, Halide::JITUserContext* context) {
  lowering::RopeAlgorithm& a = *algorithm_;
  for (int i = 0; i < abi::kArgCount; ++i) {
    const abi::Arg arg = static_cast<abi::Arg>(i);
    if (abi::info(arg).direction != abi::Direction::In) continue;
    if (abi::is_tensor(arg)) {
      if (a.uses(arg)) a.input(arg).set(args[arg]);
    } else if (arg == abi::Arg::PoolThreads) {
      a.scalar(arg).set(int64_t{pool_threads_ ? std::max(pool_threads_(), 1) : 1});  // 0 before the pool's first loop
    } else if (abi::info(arg).kind == abi::ArgKind::Int64) {
      a.scalar(arg).set(args.scalars[arg].i64);
    } else {
      a.scalar(arg).set(args.scalars[arg].f32);
    }
  }
  pipeline_.realize(context, Halide::Realization(args.outputs()), target_);
}

void JitKernel::realize(const PipelineCopy& copy, Halide::JITUserContext* context) {
  pass_through_->input.set(copy.in);
  pass_through_pipeline_.realize(context, Halide::Realization({copy.out}), target_);
}

}  // namespace ropegen::runtime
