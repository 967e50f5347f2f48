/* ropegen_c.h: rope-gen's C interface (C99), shipped with every AOT library
 * and installed with libropegen. Hand-written and fixed: a library's
 * generated header (<name>.h) only adds its spec's constants and one entry
 * function, <name>_run(), that takes the call described here.
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
  void *data;             /* first element, less byte_offset */
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
 *               slot_mapping[t]. Index tensors are int32; a negative batch index
 *               or slot skips the token's append (vLLM's padding). Every index is
 *               checked before anything runs; cache entries no token addresses
 *               are never written. out_k, when given, also receives rotated k
 *               (without it k is not written; it may not be k itself).
 *   saved_q, saved_k  backward with run-time frequencies: the forward's inputs.
 *   d_freqs     backward with run-time frequencies: float32 [rotary_dim / 2],
 *               receives dL/d(inv_freq).
 *   offset      implicit positions: the first token's position (KV cache length).
 *   seq_len     the sequence length the frequencies see (dynamic NTK, LongRoPE,
 *               xPos); <= 0: as HF, max position + 1.
 *   backward    nonzero: the gradient (rotation by -angle).
 *   stream      device calls: the cudaStream_t (NULL: the default stream).
 *   k_scale, v_scale  fp8 caches (kv_cache dtype fp8_e4m3 | fp8_e5m2, uint8
 *               codes): k_cache holds the code of x / k_scale (float32 division,
 *               saturated to the format's largest finite value, rounded to
 *               nearest even: vLLM's fp8 KV cache), v_cache of x / v_scale.
 *               Finite and > 0; 0: not given (1 for fp8 caches; any other
 *               value with a cache that is not fp8 is refused).
 *   cache_positions  paged caches: int32 [T], the position in its request's
 *               pages each token goes to (FlashInfer's fused op: `positions`
 *               place, `pos_ids` rotate); NULL: positions place them too.
 *   q_norm_weight, k_norm_weight  qk_norm weight per_head: the per-head norms'
 *               weights [head_dim] in the spec's dtype (k_norm_weight with k). */
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

/* ---- For generated headers: what an AOT library's <name>_run() passes. ---- */

/* What a call must satisfy: the spec as far as its arguments are concerned
 * (rope-gen writes it from the spec; ropegen::call_contract in C++). */
typedef struct ropegen_contract {
  int32_t encoding;           /* 0 rope, 1 sinusoidal, 2 learned, 3 alibi */
  int32_t layout;             /* 0 bshd, 1 bhsd, 2 sbhd, 3 thd, 4 bsd, 5 sbd, 6 td */
  ropegen_dtype dtype;        /* of every tensor but ids and frequencies */
  int32_t row_dim;            /* the last dim: head_dim (rope) or dim; 0: any (alibi's keys) */
  int32_t num_heads;          /* alibi: H of the scores; 0 otherwise */
  int32_t rotary_offset, rotary_dim;
  int32_t pairing, output_pairing; /* 0 half, 1 interleaved */
  int32_t explicit_positions;
  int32_t position_axes;      /* multi-axis: ids per token; 0: one */
  int32_t runtime_frequencies;
  int32_t table_frequencies;  /* frequency scheme table: the call passes cos_sin_cache */
  int32_t kv_layout;          /* fused KV-cache append: 0 none, 1 paged_nhd, 2 paged_hnd, 3 contiguous */
  int32_t kv_page_size;       /* paged layouts: entries per page */
  ropegen_dtype kv_dtype;     /* of k_cache and v_cache (fp8 caches: uint8 codes) */
  int32_t kv_fp8;             /* fp8 caches: 1 fp8_e4m3 (e4m3fn), 2 fp8_e5m2; 0 otherwise */
  int32_t qk_norm;            /* q and k normalised per head: 0 no, 1 rms, 2 rms_one_plus (the kernel writes whole rows) */
  int32_t qk_norm_weight;     /* qk_norm weight per_head: the call passes q_norm_weight (and k_norm_weight) */
} ropegen_contract;

struct halide_filter_metadata_t;

/* One compiled entry point of an AOT library (Halide's _argv form). */
typedef struct ropegen_entry {
  int (*argv)(void **args);
  const struct halide_filter_metadata_t *(*metadata)(void);
  int32_t with_k, int64_positions, backward;
  int32_t pass_through; /* nonzero: the partial-rotary copy, not a kernel variant */
  int32_t with_v;       /* kv_cache specs: v copied into v_cache (with_k: out_k written too) */
  int32_t device_type;  /* ROPEGEN_DEVICE_*: the tensors it runs on (GPU entries take a
                           user_context first: the call's device and stream) */
} ropegen_entry;

struct halide_device_interface_t;

struct halide_buffer_t;

/* A GPU API an AOT library was built for, served by the library's own Halide
 * runtime (which dlopens the driver: libcuda.so.1, libvulkan.so.1). Functions
 * return ROPEGEN_OK or a status, and say why in `message` (may be NULL). */
typedef struct ropegen_device_api {
  int32_t device_type; /* ROPEGEN_DEVICE_CUDA or ROPEGEN_DEVICE_VULKAN */
  const struct halide_device_interface_t *(*interface)(void);
  /* Kernels can run on device `device_id`: driver loaded, device there (CUDA:
   * its primary context retained). */
  int (*ready)(int32_t device_id, ropegen_message *message);
  /* Vulkan (NULL for CUDA, whose tensors are the caller's own memory): device
   * memory of the library's runtime, `bytes` at the address *data stands
   * for (never dereference it; *data + n is byte n), its copies (any address
   * inside an allocation), and for one launch a view's address (view->device)
   * turned into a handle of the runtime, released after. */
  int (*alloc)(size_t bytes, void **data, ropegen_message *message);
  int (*free)(void *data, ropegen_message *message);
  int (*copy)(void *data, void *host, size_t bytes, int32_t to_device, ropegen_message *message);
  int (*bind_view)(struct halide_buffer_t *view, const char *name, ropegen_message *message);
  void (*release_view)(struct halide_buffer_t *view);
} ropegen_device_api;

/* In an AOT library's archive when it has a CUDA or Vulkan target. */
extern const ropegen_device_api ropegen_cuda_api, ropegen_vulkan_api;

typedef struct ropegen_library {
  const char *name, *spec_hash;
  ropegen_contract contract;
  int32_t num_entries;
  const ropegen_entry *entries;
  const ropegen_device_api *cuda, *vulkan; /* NULL: the library has no such target */
} ropegen_library;

/* Checks the call against the library's spec and runs it; `message` may be NULL. */
int ropegen_library_run(const ropegen_library *library, const ropegen_call *call, ropegen_message *message);

/* Device memory of an AOT library with a Vulkan target, for its Vulkan tensors
 * (Halide 21 runs kernels only on Vulkan memory its own runtime allocated:
 * halide/Halide#8943): `bytes` on `device` (vulkan:0), *data the address that
 * stands for byte 0 (a ropegen_tensor's data; *data + n is byte n; never
 * dereference it). Copies take any address inside an allocation and wait for
 * the copy. Free once no call uses it. The generated <name>.h wraps these as
 * <name>_device_alloc, _device_free, _copy_to_device, _copy_to_host. */
int ropegen_library_device_alloc(const ropegen_library *library, ropegen_device device, size_t bytes, void **data,
                                 ropegen_message *message);
int ropegen_library_device_free(const ropegen_library *library, void *data, ropegen_message *message);
int ropegen_library_copy_to_device(const ropegen_library *library, void *data, const void *host, size_t bytes,
                                   ropegen_message *message);
int ropegen_library_copy_to_host(const ropegen_library *library, void *host, const void *data, size_t bytes,
                                 ropegen_message *message);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPEGEN_C_H */
