// What every compiled kernel of a spec offers, however it was obtained:
// JIT-compiled in this process (JitKernel) or loaded from the kernel cache
// (LoadedKernel). ropegen::Runtime hands out kernels through this interface.
#pragma once

#include <array>
#include <cstdint>

#include <Halide.h>

namespace ropegen::runtime {

// A caller's tensor seen as the kernels' (d, h, s, b), extents and strides
// (elements) in 64 bits as the caller has them (tensor_view.h makes them).
// Halide's buffers hold 32-bit ones: call_parts cuts a call into parts
// whose buffers fit, never truncating.
struct TensorView {
  void* data = nullptr;
  Halide::Type type;  // bits() == 0: no tensor
  std::array<int64_t, 4> extent{}, stride{};

  bool defined() const { return type.bits() != 0; }
  bool empty() const { return extent[0] == 0 || extent[1] == 0 || extent[2] == 0 || extent[3] == 0; }
};

// One call of any encoding's kernel. The single-tensor encodings pass their
// tensor (x, ALiBi's scores) as q / out_q; a backward kernel takes the
// upstream gradients as q / k and writes dL/dq, dL/dk to out_q / out_k.
struct RopeCall {
  TensorView q, out_q;                  // out may be exactly its input (in place), never overlap another tensor
  TensorView k, out_k;                  // only with a k variant
  Halide::Buffer<> positions;           // (s, b) or multi-axis (axis, s, b), explicit specs
  Halide::Buffer<int32_t> cu_seqlens;   // thd / td with implicit positions
  Halide::Buffer<> table;               // learned: (d, position), the spec's dtype
  Halide::Buffer<> freqs;               // frequency scheme runtime: (r) float32
  // Backward with run-time frequencies: the forward inputs, and dL/d(inv_freq) (r) float32.
  TensorView saved_q, saved_k;
  Halide::Buffer<> d_freqs;
  int64_t offset = 0;
  int64_t seq_len = 1;                  // HF: max position id + 1
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Rotates call.q (and call.k) into call.out_q (and call.out_k). The call
  // must already be valid for the spec (runtime::check_call, and
  // runtime::check_tensors for the memory); what is left to fail here is a
  // caller bug, reported by an exception (std::invalid_argument for the
  // tensors). An empty call does nothing.
  virtual void run(const RopeCall& call) = 0;
};

}  // namespace ropegen::runtime
