// A compiled kernel of one spec and variant, however it was obtained (JIT
// in this process, loaded from the kernel cache). ropegen::Runtime hands
// kernels out through this interface.
#pragma once

#include "ropegen/call.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen {

class Kernel {
 public:
  virtual ~Kernel() = default;

  // Checks `call` against the spec (every argument, before anything runs)
  // and runs it: q (and k) into out_q (and out_k). The call's variant must
  // be the kernel's. Errors name the argument; a failure on the device or
  // in the kernel is a diagnostic too. Thread-safe.
  virtual Status run(const Call& call) = 0;

  virtual const RopeSpec& spec() const = 0;
  virtual const KernelVariant& variant() const = 0;
};

}  // namespace ropegen
