// One call of a spec's kernel, as C++ callers describe it (the C
// interface's ropegen_call, ropegen_c.h, carries the same fields), and the
// kernel variant a call needs. Every argument is checked against the spec
// before anything runs; errors name the argument (q, k, out_q, positions,
// ...) and say the fix. A call's tensors are all on the host, or all on
// one CUDA or Vulkan device (ropegen/device_memory.h: then the values of
// ids and indices are not checked, and seq_len is not derived from them).
#pragma once

#include <cstdint>
#include <optional>

#include "ropegen/spec.h"
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
  // Fused KV-cache append (spec section kv_cache; thd): k is rotated into
  // k_cache (and into out_k only when out_k is given: without it k is read,
  // not written); v, when given, is copied into v_cache. Token t goes where
  // positions[t] says, in request batch_indices[t] (paged) or to slot
  // slot_mapping[t] (contiguous); negative: rotated (q, out_k) but not
  // appended. Caches are updated in place; nothing else in them is written.
  std::optional<Tensor> v;                // [T, Hk, Dv] in the spec's dtype (Dv may differ from head_dim)
  std::optional<Tensor> k_cache, v_cache; // the kv_cache layout's shape ([pages, page_size, Hk, D], ...), its dtype
  std::optional<Tensor> kv_indices;       // paged: int32, the pages of every request, request b's from kv_indptr[b]
  std::optional<Tensor> kv_indptr;        // paged: int32 [B + 1], never decreasing, kv_indptr[B] <= len(kv_indices)
  std::optional<Tensor> batch_indices;    // paged: int32 [T], the request of each token (< 0: not appended)
  // paged: int32 [T], where each token goes in its request's cache when
  // that is not where it is rotated (FlashInfer's fused op: `positions`
  // places, `pos_ids` rotate); absent: positions place the tokens too.
  std::optional<Tensor> cache_positions;
  std::optional<Tensor> slot_mapping;     // contiguous: int32 [T], the cache slot of each token (< 0: not appended)
  // fp8 caches (kv_cache dtype fp8_e4m3 | fp8_e5m2, uint8 tensors of codes):
  // the per-tensor scales, finite and > 0 (absent: 1). k_cache holds the code
  // of x / k_scale (float32 division, saturated to the format's largest
  // finite value, rounded to nearest even, as vLLM's fp8 KV cache), v_cache
  // of x / v_scale; with the spec's `fp8_scale: multiply`, of x * scale
  // (FlashInfer's). Refused for caches that are not fp8 (and v_scale without v).
  std::optional<float> k_scale, v_scale;
  // output_dtype fp8: out_q holds the codes of rotated q / q_scale and out_k
  // of rotated k / k_scale (the same rule as the caches', fp8_scale included;
  // absent: 1).
  // Refused for other specs.
  std::optional<float> q_scale;
  // output_quant (q alone): where each group's scale goes, float32 shaped as
  // q with head_dim / group in the last dim; out_q holds x / scale's codes.
  std::optional<Tensor> out_scales;
  // Backward with run-time frequencies (or qk_norm: saved_q, saved_k): the
  // forward inputs, and where dL/d(inv_freq) (float32 [rotary_dim / 2]) goes.
  std::optional<Tensor> saved_q, saved_k, d_freqs;
  // qk_norm weight per_head: the norms' weights [head_dim] in the spec's
  // dtype or float32, both alike (k_norm_weight with k).
  std::optional<Tensor> q_norm_weight, k_norm_weight;
  // Backward of qk_norm weight per_head: where dL/d(q_norm_weight) and
  // dL/d(k_norm_weight) go (float32 [head_dim], summed over tokens and heads;
  // d_k_norm_weight with k).
  std::optional<Tensor> d_q_norm_weight, d_k_norm_weight;
  int64_t offset = 0;                // implicit positions: the first token's position
  std::optional<int64_t> seq_len;    // absent: max position + 1 (as HF)
  bool backward = false;
  // CUDA device calls: the cudaStream_t (CUstream) of the tensors' device's
  // primary context the kernels are launched on; nullptr: the legacy
  // default stream. Vulkan calls are synchronous (ropegen/device_memory.h).
  void* stream = nullptr;

  // A C call (ropegen_c.h); diagnostics name the tensor that cannot be taken.
  static Result<Call> from_c(const ropegen_call& call);
};

enum class IdType : uint8_t { Int32, Int64 };

// What varies between compiled kernels of one spec (kernel_variant() below
// works it out from a call).
struct KernelVariant {
  // k rotated in the same call, into out_k (kv_cache specs always read k
  // and write its cache; with_k: out_k also receives rotated k)
  bool with_k = false;
  IdType position_type = IdType::Int32;  // explicit positions: the ids' width
  bool backward = false;               // rope: the gradient (rotation by -angle)
  bool with_v = false;                 // kv_cache specs: v copied into v_cache in the same call
  // qk_norm weight per_head with an f16 or bf16 spec: the weights come as
  // float32 (mixed precision keeps them so), read as they are.
  bool float32_norm_weights = false;

  bool operator==(const KernelVariant& o) const {
    return with_k == o.with_k && position_type == o.position_type && backward == o.backward && with_v == o.with_v &&
           float32_norm_weights == o.float32_norm_weights;
  }
  bool operator!=(const KernelVariant& o) const { return !(*this == o); }

};

// The variant a call of `spec` needs (what prepare_call works out; callers
// that keep one Kernel per variant ask it too).
KernelVariant kernel_variant(const RopeSpec& spec, const Call& call);

}  // namespace ropegen
