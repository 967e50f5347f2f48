// A spec compiled for one target in this process (Halide JIT), callable on
// tensors in the spec's layout. spec() is the kernel's (lowering::kernel_spec). Compilation happens once per kernel object.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"
#include "runtime/kernel.h"

namespace ropegen::runtime {

struct BufferCall;
struct RopeArguments;
struct PassThroughArguments;

// GPU targets run from and to host memory, staged (runtime/device_call.h);
// run() throws DeviceError when the device fails.
class JitKernel : public Kernel {
 public:
  JitKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target);
  void run(const RopeCall& call) override;  // not reentrant: binds the pipeline's parameters
  const RopeSpec& spec() const { return spec_; }

 private:
  void run_part(const BufferCall& part);
  void realize(const RopeArguments& args);
  void realize(const PassThroughArguments& copy);

  RopeSpec spec_;
  std::unique_ptr<lowering::RopeAlgorithm> algorithm_;
  Halide::Pipeline pipeline_;
  // Partial-rotary specs only: copies the other dims on out-of-place calls.
  std::unique_ptr<lowering::PassThroughCopy> pass_through_;
  Halide::Pipeline pass_through_pipeline_;
  Halide::Target target_;
};

}  // namespace ropegen::runtime
