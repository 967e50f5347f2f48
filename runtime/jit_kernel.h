// A spec compiled for one target in this process (Halide JIT). spec() is the
// kernel's (lowering::kernel_spec). Compilation happens once per kernel object.
#pragma once

#include <memory>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"
#include "runtime/kernel.h"
#include "runtime/pipeline_arguments.h"

namespace ropegen::runtime {

// GPU targets run device calls (tensors on the target's device) where the
// tensors are, and host calls staged through device buffers
// (runtime/device_call.h); run() throws DeviceError when the device fails.
class JitKernel : public CompiledKernel {
 public:
  JitKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target);
  void run(const call::PreparedCall& call) override;  // not reentrant: binds the pipeline's parameters
  const RopeSpec& spec() const { return spec_; }

 private:
  void run_part(const call::PartViews& part, Halide::JITUserContext* context);
  // A device call: its parts' views bound to the device (Vulkan: handles of
  // rope-gen's allocations, runtime/device_memory.h), nothing staged.
  void run_on_device_memory(const call::PreparedCall& call);
  void realize(const PipelineArguments& args, Halide::JITUserContext* context);
  void realize(const PipelineCopy& copy, Halide::JITUserContext* context);

  RopeSpec spec_;
  ropegen_contract contract_;  // spec_'s
  std::unique_ptr<lowering::RopeAlgorithm> algorithm_;
  Halide::Pipeline pipeline_;
  // Partial-rotary specs only: copies the other dims on out-of-place calls.
  std::unique_ptr<lowering::PassThroughCopy> pass_through_;
  Halide::Pipeline pass_through_pipeline_;
  Halide::Target target_;
  int (*pool_threads_)() = nullptr;  // the JIT runtime's halide_get_num_threads (CPU targets)
  // GPU targets: the JIT runtime's interface for the target's device API,
  // which device calls' views carry (call/parts.h).
  const halide_device_interface_t* device_interface_ = nullptr;
};

}  // namespace ropegen::runtime
