// What every compiled kernel of a spec offers, however it was obtained:
// JIT-compiled in this process (JitKernel) or loaded from the kernel cache
// (LoadedKernel). ropegen::Runtime hands out kernels through this interface.
#pragma once

#include <cstdint>

#include <Halide.h>

namespace ropegen::runtime {

// One call of any encoding's kernel. The single-tensor encodings pass their
// tensor (x, ALiBi's scores) as q / out_q; a backward kernel takes the
// upstream gradients as q / k and writes dL/dq, dL/dk to out_q / out_k.
struct RopeCall {
  Halide::Buffer<> q, out_q;            // logical (d, h, s, b) views; out may alias in
  Halide::Buffer<> k, out_k;            // only with a k variant
  Halide::Buffer<> positions;           // (s, b) or multi-axis (axis, s, b), explicit specs
  Halide::Buffer<int32_t> cu_seqlens;   // thd / td with implicit positions
  Halide::Buffer<> table;               // learned: (d, position), the spec's dtype
  Halide::Buffer<> freqs;               // frequency scheme runtime: (r) float32
  // Backward with run-time frequencies: the forward inputs, and dL/d(inv_freq) (r) float32.
  Halide::Buffer<> saved_q, saved_k, d_freqs;
  int64_t offset = 0;
  int64_t seq_len = 1;                  // HF: max position id + 1
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Rotates call.q (and call.k) into call.out_q (and call.out_k). The call
  // must already be valid for the spec (runtime::check_call); what is left
  // to fail here is a caller bug, reported by an exception.
  virtual void run(const RopeCall& call) = 0;
};

}  // namespace ropegen::runtime
