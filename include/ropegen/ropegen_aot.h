/* ropegen_aot.h: the plumbing of rope-gen's AOT libraries (C99), shipped with
 * every library next to ropegen_c.h. A library's generated header (<name>.h)
 * includes it: its <name>_run() hands the library's contract, entry points
 * and device APIs (described here) to ropegen_library_run, which checks the
 * call and runs it. Callers use <name>.h and the types of ropegen_c.h; nothing
 * here is needed to call a library.
 */
#ifndef ROPEGEN_AOT_H
#define ROPEGEN_AOT_H

#include "ropegen_c.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  int32_t output_fp8;         /* out_q, out_k: 0 the spec's dtype; fp8 codes (uint8, whole rows) 1 fp8_e4m3, 2 fp8_e5m2 */
  int32_t output_quant_group; /* output_quant: dims per scale (out_scales); 0: none */
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
  int32_t float32_norm_weights; /* qk_norm weights read as float32 (f16 and bf16 specs) */
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

#endif /* ROPEGEN_AOT_H */
