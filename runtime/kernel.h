// What every compiled kernel of a spec offers inside the runtime, however it
// was obtained: JIT-compiled in this process (JitKernel) or loaded from the
// kernel cache (loaded_kernel). The public ropegen::Kernel (ropegen/kernel.h)
// wraps one: it prepares each call (call/prepare_call.h) and runs it here.
#pragma once

#include <stdexcept>
#include <string>

#include "call/prepare_call.h"

namespace ropegen::runtime {

// What failed on the device (allocation, copy, launch) or in a kernel: a
// user-facing message, not a bug in rope-gen.
class KernelFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why a kernel that runs on `runs_on` ("the host (cpu)", a target) cannot
// take `call`'s tensors, for a KernelFailure.
std::string device_mismatch(const call::PreparedCall& call, const std::string& runs_on);

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // Runs a call prepare_call accepted for this kernel's spec and variant.
  // Throws KernelFailure. An empty call does nothing.
  virtual void run(const call::PreparedCall& call) = 0;
};

}  // namespace ropegen::runtime
