// One call of a spec's kernel, as C++ callers describe it (the C
// interface's ropegen_call, ropegen_c.h, carries the same fields), and the
// kernel variant a call needs. Every argument is checked against the spec
// before anything runs; errors name the argument (q, k, out_q, positions,
// ...) and say the fix.
#pragma once

#include <cstdint>
#include <optional>

#include "ropegen/tensor.h"

namespace ropegen {

struct Call {
  // rope: q (, k); sinusoidal, learned: x as q; alibi: scores [B, H, Sq, Sk]
  // as q. Backward: the upstream gradients.
  std::optional<Tensor> q, k;
  // Where the results go, shaped like q and k; absent: in place.
  std::optional<Tensor> out_q, out_k;
  std::optional<Tensor> positions;   // explicit ids, int32 or int64: q's token dims, or [S] shared by the batch
  std::optional<Tensor> cu_seqlens;  // thd, td: int32 or int64 [n + 1]; absent: one sequence
  std::optional<Tensor> table;       // learned: [max_len, dim]
  std::optional<Tensor> freqs;       // frequency scheme runtime: float32 [rotary_dim / 2]
  // Frequency scheme table: float32 [max_pos, rotary_dim], row p = [cos of
  // the pairs | their sin] at position p (any attention factor included);
  // last dim contiguous, any row stride; every position < max_pos.
  std::optional<Tensor> cos_sin_cache;
  // Backward with run-time frequencies: the forward inputs, and where
  // dL/d(inv_freq) (float32 [rotary_dim / 2]) goes.
  std::optional<Tensor> saved_q, saved_k, d_freqs;
  int64_t offset = 0;                // implicit positions: the first token's position
  std::optional<int64_t> seq_len;    // absent: max position + 1 (as HF)
  bool backward = false;
  void* stream = nullptr;            // device calls: cudaStream_t; nullptr: the default stream

  // A C call (ropegen_c.h); diagnostics name the tensor that cannot be taken.
  static Result<Call> from_c(const ropegen_call& call);
};

enum class IdType : uint8_t { Int32, Int64 };

// What varies between compiled kernels of one spec; of() works it out from
// a call (prepare_call and callers that keep one Kernel per variant).
struct KernelVariant {
  bool with_k = false;                 // k rotated in the same call
  IdType position_type = IdType::Int32;  // explicit positions: the ids' width
  bool backward = false;               // rope: the gradient (rotation by -angle)

  bool operator==(const KernelVariant& o) const {
    return with_k == o.with_k && position_type == o.position_type && backward == o.backward;
  }
  bool operator!=(const KernelVariant& o) const { return !(*this == o); }

  static KernelVariant of(const Call& c) {
    const bool wide_ids = c.positions && c.positions->type == ElementType::Int64;
    return {c.k.has_value(), wide_ids ? IdType::Int64 : IdType::Int32, c.backward};
  }
};

}  // namespace ropegen
