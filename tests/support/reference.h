// Independent float64 reference implementation of the positional encodings,
// used by the test suite as ground truth. It shares NO code with lowering/:
// it depends only on the public spec header and the C++ standard library.
// It transcribes the formulas of Hugging Face transformers
// (modeling_rope_utils.py + LlamaRotaryEmbedding, Qwen2-VL / Qwen3-VL M-RoPE,
// RoFormer / XLM sinusoidal tables, BLOOM ALiBi) and lucidrains
// rotary-embedding-torch (pixel / constant / custom / learned freqs, xPos,
// axial freqs) and the user's seed documents directly.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ropegen/spec.h"

namespace ropegen::ref {

struct Freqs {
  std::vector<double> inv_freq;      // rotary_dim/2, after scaling: the frequency of pair r (multi-axis too)
  double attention_factor = 1.0;     // multiplies cos and sin (HF attention_scaling)
  std::vector<double> xpos_scale;    // rotary_dim/2 per-pair xPos bases s_i (empty if xpos disabled)
};

// seq_len: the run-time sequence length (dynamic NTK, longrope per_call, xPos);
// nullopt means "not given". runtime_inv_freq: frequency.scheme runtime's
// call-time values [rotary_dim/2]; they stand where a custom scheme's values
// would, so scaling applies to them alike.
Freqs reference_freqs(const RopeSpec& spec, std::optional<int64_t> seq_len,
                      const std::vector<double>& runtime_inv_freq = {});

// The position axis of rotary pair r: contiguous spec.axes.sections, or with
// axes.interleaved Qwen3-VL's round robin (axis a >= 1 where r % n == a and
// r < n * sections[a], else 0). Always 0 for 1-D specs.
int pair_axis(const Axes& axes, int r);

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major
};

struct Call {
  // Explicit ids: shape = the layout's token dims ([B,S] for bshd/bhsd/bsd,
  // [S,B] for sbhd/sbd, [T] for thd/td) or [S] (shared across the batch);
  // multi-axis specs add a trailing [n_axes].
  std::optional<Tensor> positions;
  int64_t offset = 0;                // implicit positions: offset + index along S
  std::vector<int64_t> cu_seqlens;   // thd/td: B+1 cumulative token starts (empty = one sequence)
  std::optional<int64_t> seq_len;    // default: max position in the call + 1 (HF: max(position_ids)+1)
  std::vector<double> inv_freq;      // frequency.scheme runtime: inv_freq [rotary_dim/2]
  std::optional<Tensor> table;       // learned: [max_len, dim]
  // frequency.scheme table: [max_pos, rotary_dim], row p = [cos | sin] of the
  // pairs at position p (attention factor included), used as it is.
  std::optional<Tensor> cos_sin_cache;
  // qk_norm weight per_head: the norms' weights [head_dim].
  std::vector<double> q_norm_weight, k_norm_weight;
};

// qk_norm (spec.qk_norm): each row x (the last dim, head_dim) as
// x / sqrt(mean(x^2) + eps) * w' (w' = w, 1 + w for rms_one_plus, 1 for
// weight none), the norm over all head_dim dims: Qwen3RMSNorm's and
// Gemma3RMSNorm's formula without their float32 and dtype roundings.
Tensor reference_qk_norm(const RopeSpec& spec, const Tensor& x, const std::vector<double>& weight);

// Its backward from dL/d(normed) `d_normed` and the forward input x: dL/dx
// = (g - x (g . x) / (head_dim rms^2)) / rms with g = d_normed w', and
// dL/dw = the sum over every row of d_normed x / rms (empty without a weight).
struct NormGradients {
  Tensor dx;
  std::vector<double> d_weight;
};
NormGradients reference_qk_norm_backward(const RopeSpec& spec, const Tensor& x, const Tensor& d_normed,
                                         const std::vector<double>& weight);

// Rotates x (q if !is_key, k if is_key; with qk_norm, x normalised first
// with call.q_norm_weight or k_norm_weight) laid out per spec.layout:
// bshd [B,S,H,D], bhsd [B,H,S,D], sbhd [S,B,H,D], thd [T,H,D]; D = head_dim.
// Throws std::invalid_argument on inconsistent shapes.
Tensor reference_apply(const RopeSpec& spec, const Tensor& x, bool is_key, const Call& call);

struct Gradients {
  Tensor dx;                        // dL/dx, shaped as the upstream gradient
  std::vector<double> d_inv_freq;   // dL/d(inv_freq) [rotary_dim/2] summed over tokens and heads; empty without `saved`
  std::vector<double> d_norm_weight;  // qk_norm per_head: dL/d(its weight)
                                      // [head_dim], summed likewise
};

// Backward of reference_apply for the upstream gradient `grad` (shaped as x):
// the transposed rotation times the same attention factor and xPos scale,
// read at output_pairing's dims and written at pairing's; pass-through dims
// unchanged. With `saved` (the forward input) also the frequency gradient
// sum(pos * factor * (g1*y0 - g0*y1)), y the unscaled rotation of the saved
// pair. qk_norm: `saved` is required, and the rotation's backward is followed
// by the norm's (reference_qk_norm_backward) instead.
Gradients reference_backward(const RopeSpec& spec, const Tensor& grad, const Tensor* saved, bool is_key,
                             const Call& call);

// sinusoidal, learned: x + the table's rows at the tokens' positions (learned:
// call.table); x is bsd [B,S,D], sbd [S,B,D] or td [T,D].
Tensor reference_add_positions(const RopeSpec& spec, const Tensor& x, const Call& call);

// alibi: scores [B, H, Sq, Sk] plus spec.alibi_form's bias; query row r sits
// at position offset + r (decode with a KV cache), key j at j.
Tensor reference_alibi(const RopeSpec& spec, const Tensor& scores, int64_t offset);
// Seed 002's get_alibi_slopes (the ALiBi paper's), float64.
std::vector<double> reference_alibi_slopes(int num_heads);

// The table at call.positions ([N], or [N, n_axes] multi-axis): rope
// [N, rotary_dim] = [cos of the pairs | sin of the pairs] x attention factor;
// sinusoidal [N, dim] in spec.table_form.
Tensor reference_table(const RopeSpec& spec, const Call& call);

// The fused KV-cache append's indices (spec.kv_cache), as FlashInfer's
// append_paged_kv_cache (include/flashinfer/page.cuh) and vLLM's
// reshape_and_cache read them.
struct KvIndices {
  std::vector<int64_t> positions;                             // [T]
  std::vector<int64_t> kv_indices, kv_indptr, batch_indices;  // paged
  std::vector<int64_t> slot_mapping;                          // contiguous
};

// Writes rows [T, Hk, Dx] (rotated k, or v) into `cache` shaped by
// spec.kv_cache.layout: token t of request b = batch_indices[t] at
// p = positions[t] to page kv_indices[kv_indptr[b] + p / page_size], entry
// p % page_size (paged_nhd [pages, page_size, Hk, Dx], paged_hnd [pages, Hk,
// page_size, Dx]); contiguous [slots, Hk, Dx] to slot slot_mapping[t].
// Tokens with a negative batch index or slot are skipped. Throws
// std::invalid_argument for an index outside the cache.
void reference_kv_append(const RopeSpec& spec, const Tensor& rows, const KvIndices& indices, Tensor& cache);

// fp8 caches (kv_cache dtype fp8_e4m3: OCP's e4m3fn, bias 7, no
// infinities, S.1111.111 NaN; fp8_e5m2: bias 15, IEEE-like with infinities).
// The value of a code, from its sign, exponent and mantissa fields (NaN for
// NaN codes, +-inf for e5m2's infinities).
double fp8_value(KvDType format, uint8_t code);
// The largest finite value: 448 (e4m3), 57344 (e5m2).
double fp8_max(KvDType format);
// The code an fp8 cache stores for x with per-tensor `scale`, as vLLM's
// fp8 KV cache does (csrc/quantization/fp8/nvidia/quant_utils.cuh:
// float(x) / scale in float32, then __nv_cvt_float_to_fp8 with
// __NV_SATFINITE): q = x / scale rounded to float32, clamped to +-max
// (infinities too), then the code among all 256 whose value is nearest q,
// a tie to the code with an even mantissa; a NaN is 0x7f with x's sign.
// Found by search over the codes, not by bit manipulation. Fp8Scale::Multiply:
// q = x * scale rounded to float32 (FlashInfer's quant_scale), the rest alike.
uint8_t fp8_code(KvDType format, float x, float scale, Fp8Scale rule = Fp8Scale::Divide);

}  // namespace ropegen::ref
