/* ropegen_c.h: rope-gen's C interface (C99), shipped with every AOT library
 * and installed with libropegen. Hand-written and fixed: a library's
 * generated header (<name>.h) only adds its spec's constants and one entry
 * function, <name>_run(), that takes the call described here.
 *
 * What an AOT library's <name>_run() passes to the library (its contract,
 * entries and device APIs) is the plumbing of ropegen_aot.h, which the
 * generated header includes; a caller needs only this file.
 *
 * Tensors are DLPack's DLTensor field for field (ropegen_tensor,
 * ropegen_device, ropegen_dtype have DLTensor's, DLDevice's and
 * DLDataType's layout and codes), so a DLTensor* from PyTorch, JAX or CuPy
 * is passed as a ropegen_tensor* without copying anything.
 *
 * Every check a call needs (shapes against the spec, dtypes, aliasing and
 * overlaps, position ranges, sizes that a kernel can address) is made before
 * anything runs; a call that fails them changes nothing and returns
 * ROPEGEN_ERROR_INVALID_ARGUMENT with a message naming the argument.
 */
#ifndef ROPEGEN_C_H
#define ROPEGEN_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DLDeviceType's codes for the devices rope-gen runs on. */
enum {
  ROPEGEN_DEVICE_CPU = 1,    /* kDLCPU */
  ROPEGEN_DEVICE_CUDA = 2,   /* kDLCUDA */
  ROPEGEN_DEVICE_VULKAN = 7  /* kDLVulkan */
};

typedef struct ropegen_device {
  int32_t device_type; /* ROPEGEN_DEVICE_* */
  int32_t device_id;
} ropegen_device;

/* DLDataTypeCode's codes. */
enum {
  ROPEGEN_DTYPE_INT = 0,   /* kDLInt */
  ROPEGEN_DTYPE_UINT = 1,  /* kDLUInt */
  ROPEGEN_DTYPE_FLOAT = 2, /* kDLFloat */
  ROPEGEN_DTYPE_BFLOAT = 4 /* kDLBfloat */
};  /* fp8 KV caches are uint8 (ROPEGEN_DTYPE_UINT, 8 bits): the codes */

typedef struct ropegen_dtype {
  uint8_t code;   /* ROPEGEN_DTYPE_* */
  uint8_t bits;   /* float 32/16, bfloat 16, int 32/64, uint 8 */
  uint16_t lanes; /* 1 */
} ropegen_dtype;

/* A tensor the caller owns; rope-gen keeps no pointer after a call. */
typedef struct ropegen_tensor {
  void *data;             /* first element, less byte_offset; NULL only without elements */
  ropegen_device device;
  int32_t ndim;
  ropegen_dtype dtype;
  int64_t *shape;         /* ndim extents */
  int64_t *strides;       /* ndim strides in elements; NULL: dense row-major */
  uint64_t byte_offset;
} ropegen_tensor;

/* One call of a spec's kernel. Tensors the call does not need are NULL;
 * zero-initialise the struct and set what you pass. Shapes are in the
 * spec's layout (docs/spec.md, "Tensor layouts").
 *   q, k        rope: q, and k (may differ from q in its number of heads only).
 *               sinusoidal, learned: x as q; alibi: the scores [B, H, Sq, Sk] as q.
 *               backward: the upstream gradients dL/d(out_q), dL/d(out_k).
 *   out_q, out_k  where the results go, shaped like q and k; NULL: in place
 *               (or out_q == q). Any other overlap with an argument is refused.
 *   positions   explicit-position specs: int32 or int64 ids, the token dims
 *               of q ([B, S], [S, B] or [T]) or [S] shared by the batch;
 *               multi-axis: plus a trailing [n_axes].
 *   cu_seqlens  packed layouts (thd, td): int32 or int64 [n + 1] sequence
 *               starts 0 .. T; NULL: one sequence of all T tokens.
 *   table       learned: [max_len, dim] in the spec's dtype.
 *   freqs       frequency scheme runtime: float32 inv_freq [rotary_dim / 2].
 *   cos_sin_cache  frequency scheme table: float32 [max_pos, rotary_dim], row p
 *               = [cos of the rotary_dim / 2 pairs | their sin] at position p,
 *               times any attention factor (vLLM's, FlashInfer's cos_sin_cache;
 *               `rope-gen table` writes one). Its last dim is contiguous, its
 *               row stride free; every position must be < max_pos.
 *   v, k_cache, v_cache, kv_indices, kv_indptr, batch_indices, slot_mapping
 *               fused KV-cache append (spec section kv_cache, layout thd; FlashInfer's
 *               append_paged_kv_cache, vLLM's reshape_and_cache): k (required) is
 *               rotated into k_cache and v [T, Hk, Dv] (optional: MLA has none) copied
 *               into v_cache, both in the cache dtype (fp8: k_scale, v_scale below). Token t of request
 *               b = batch_indices[t] at p = positions[t] goes to page
 *               kv_indices[kv_indptr[b] + p / page_size], entry p % page_size
 *               (paged_nhd [pages, page_size, Hk, D], paged_hnd [pages, Hk,
 *               page_size, D]); contiguous [num_slots, Hk, D]: slot
 *               slot_mapping[t]. Index tensors are int32 (host calls: int64 too,
 *               checked as given, then narrowed); a negative batch index
 *               or slot skips the token's append (vLLM's padding). Every index is
 *               checked before anything runs; cache entries no token addresses
 *               are never written. out_k, when given, also receives rotated k
 *               (without it k is not written; it may not be k itself).
 *   saved_q, saved_k  backward with run-time frequencies or qk_norm: the forward's inputs.
 *   d_freqs     backward with run-time frequencies: float32 [rotary_dim / 2],
 *               receives dL/d(inv_freq).
 *   offset      implicit positions: the first token's position (KV cache length);
 *               with explicit positions it must be 0 (the ids are read as given).
 *   seq_len     the sequence length the frequencies see (dynamic NTK, LongRoPE,
 *               xPos); <= 0: as HF, max position + 1.
 *   backward    nonzero: the gradient (rotation by -angle).
 *   stream      device calls: the cudaStream_t (NULL: the default stream).
 *   k_scale, v_scale  fp8 caches (kv_cache dtype fp8_e4m3 | fp8_e5m2, uint8
 *               codes): k_cache holds the code of x / k_scale (float32 division,
 *               saturated to the format's largest finite value, rounded to
 *               nearest even: vLLM's fp8 KV cache), v_cache of x / v_scale
 *               (spec fp8_scale multiply: of x * scale, FlashInfer's). Finite and > 0; 0: not given (1 for fp8 caches; any other
 *               value with a cache that is not fp8 is refused). output_dtype fp8:
 *               out_k holds the codes of rotated k / k_scale, likewise.
 *   q_scale     output_dtype fp8 (out_q, out_k uint8 codes, whole rows): out_q
 *               holds the code of rotated q / q_scale, as k_scale's rule. 0: not given.
 *   out_scales  output_quant (q alone): float32 shaped as q with head_dim / group
 *               in the last dim, receives each group's scale (out_q: codes of x / scale).
 *   cache_positions  paged caches: int32 [T], the position in its request's
 *               pages each token goes to (FlashInfer's fused op: `positions`
 *               place, `pos_ids` rotate); NULL: positions place them too.
 *   q_norm_weight, k_norm_weight  qk_norm weight per_head: the per-head norms'
 *               weights [head_dim] in the spec's dtype or float32, both alike
 *               (k_norm_weight with k).
 *   d_q_norm_weight, d_k_norm_weight  backward of qk_norm weight per_head:
 *               float32 [head_dim], receive dL/d(q_norm_weight) and
 *               dL/d(k_norm_weight), summed over tokens and heads (with k). */
typedef struct ropegen_call {
  const ropegen_tensor *q, *k;
  const ropegen_tensor *out_q, *out_k;
  const ropegen_tensor *positions, *cu_seqlens;
  const ropegen_tensor *table, *freqs, *cos_sin_cache;
  const ropegen_tensor *v, *k_cache, *v_cache, *kv_indices, *kv_indptr, *batch_indices, *slot_mapping;
  const ropegen_tensor *saved_q, *saved_k, *d_freqs;
  int64_t offset;
  int64_t seq_len;
  int32_t backward;
  void *stream;
  float k_scale, v_scale;
  const ropegen_tensor *cache_positions;
  const ropegen_tensor *q_norm_weight, *k_norm_weight;
  const ropegen_tensor *d_q_norm_weight, *d_k_norm_weight;
  float q_scale;
  const ropegen_tensor *out_scales;
} ropegen_call;

typedef enum ropegen_status {
  ROPEGEN_OK = 0,
  ROPEGEN_ERROR_INVALID_ARGUMENT = 1, /* the call does not fit the spec; nothing ran */
  ROPEGEN_ERROR_UNSUPPORTED = 2,      /* valid, but not with this library (a device it was not built for) */
  ROPEGEN_ERROR_KERNEL = 3,           /* a kernel failed while running (Halide's runtime error) */
  ROPEGEN_ERROR_OUT_OF_MEMORY = 4
} ropegen_status;

/* Where a failed call says why: one or more lines, NUL-terminated, cut to fit. */
typedef struct ropegen_message {
  char text[1024];
} ropegen_message;

/* "ok", "invalid argument", ... */
const char *ropegen_status_string(int status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPEGEN_C_H */
