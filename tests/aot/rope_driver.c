/* Calls <name>_run() of a built AOT library exactly as a C user would:
 * ropegen_tensor and ropegen_call structs filled in C, one call. Compiled by
 * aot_build_test.cpp with the system C compiler against only the files
 * `rope-gen build` produced:
 *   -DROPE_HEADER='"name.h"' -DRUN_FN=name_run
 * Usage: rope_driver DIR. DIR/call.txt holds integers in this order:
 *   dtype_code dtype_bits, rank, q_shape[rank], q_strides[rank], q_elements,
 *   has_k [k_shape[rank], k_strides[rank], k_elements], in_place,
 *   positions_rank [positions_shape[rank], positions_are_int64],
 *   num_sequences [cu_seqlens[num_sequences + 1], cu_seqlens_are_int64],
 *   offset, seq_len, backward,
 *   cache_rows cache_columns (0 0: no cos_sin_cache),
 *   optionally device_type device_id (ROPEGEN_DEVICE_*; absent: cpu 0), where
 *   every tensor goes (device_memory.h)
 * and DIR/{q,k,out_q,out_k,positions,cos_sin_cache}.bin the raw data (out_*: the output
 * buffers' initial contents). qk_norm specs: DIR/{q,k}_norm_weight.bin, when
 * there, are the weights ([head_dim], q's dtype; float32 where the file
 * DIR/float32_norm_weights is there) and DIR/saved_{q,k}.bin the
 * backward's forward inputs (shaped as q, k); a backward given weights also
 * passes d_q_norm_weight (, d_k_norm_weight) and writes them to
 * DIR/result_d_{q,k}_norm_weight.bin. output_dtype fp8 specs: DIR/fp8_outputs
 * holds "q_scale k_scale", and out_q, out_k are uint8 codes (one byte an
 * element); DIR/quant_group, when there, holds output_quant's group: the
 * call passes out_scales (q's dense shape with the last dim / group) and
 * writes DIR/result_scales.bin. Writes DIR/result_{q,k}.bin (the output
 * buffers after the call) and prints "rc=N", then the message if N != 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include ROPE_HEADER

#include "driver_common.h"
#include "device_memory.h"

static int64_t next(FILE *f) {
  long v;
  if (fscanf(f, "%ld", &v) != 1) exit(102);
  return (int64_t)v;
}

/* Every tensor of the call and its bytes, moved to the call's device once
 * call.txt is read. */
static struct {
  ropegen_tensor *tensor;
  void *host;
  size_t bytes;
} tensors[16];
static int num_tensors;

static int exists(const char *name) {
  char path[8192];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (!(f = fopen(path, "rb"))) return 0;
  fclose(f);
  return 1;
}

static const ropegen_tensor *remember(ropegen_tensor *t, size_t bytes) {
  tensors[num_tensors].tensor = t;
  tensors[num_tensors].host = t->data;
  tensors[num_tensors++].bytes = bytes;
  return t;
}

/* Copies the tensor over host buffer `host` back from the device. */
static void fetch(void *host) {
  int i;
  for (i = 0; i < num_tensors; ++i)
    if (tensors[i].host == host) {
      from_device(host, tensors[i].tensor->data, tensors[i].bytes);
      return;
    }
}


int main(int argc, char **argv) {
  int64_t q_shape[4], q_strides[4], k_shape[4], k_strides[4], positions_shape[3], cu_shape[1], cache_shape[2];
  int64_t q_elements, k_elements = 0, cu[64];
  int code, bits, bytes, rank, has_k, in_place, positions_rank, positions_are_int64 = 0, num_sequences, i, rc;
  int cu_int64 = 0, device_type, device_id = 0, repeat;
  int out_code, out_bits, out_bytes, group = 0;
  int64_t scales_shape[4];
  float *scales = NULL;
  ropegen_tensor tscales;
  void *q, *k = NULL, *out_q, *out_k = NULL, *positions = NULL, *cu_data = NULL, *cache = NULL;
  void *d_weight[2] = {NULL, NULL};
  int weight_f32;
  size_t weight_bytes;
  int64_t head_dim[1];
  ropegen_tensor tq, tk, tout_q, tout_k, tpositions, tcu, tcache, tweight[2], tsaved[2], td_weight[2];
  ropegen_call call;
  ropegen_message message;
  FILE *in;
  char path[8192];
  if (argc != 2) return 103;
  snprintf(dir, sizeof dir, "%s", argv[1]);
  snprintf(path, sizeof path, "%s/call.txt", dir);
  if (!(in = fopen(path, "r"))) return 104;
  memset(&call, 0, sizeof call);

  code = (int)next(in);
  bits = (int)next(in);
  bytes = bits / 8;
  rank = (int)next(in);
  for (i = 0; i < rank; ++i) q_shape[i] = next(in);
  for (i = 0; i < rank; ++i) q_strides[i] = next(in);
  q_elements = next(in);
  has_k = (int)next(in);
  if (has_k) {
    for (i = 0; i < rank; ++i) k_shape[i] = next(in);
    for (i = 0; i < rank; ++i) k_strides[i] = next(in);
    k_elements = next(in);
  }
  in_place = (int)next(in);
  positions_rank = (int)next(in);
  if (positions_rank) {
    int64_t n = 1;
    for (i = 0; i < positions_rank; ++i) n *= positions_shape[i] = next(in);
    positions_are_int64 = (int)next(in);
    positions = read_file("positions.bin", (size_t)n * (positions_are_int64 ? 8 : 4));
    tpositions = tensor(positions, positions_rank, positions_shape, NULL, ROPEGEN_DTYPE_INT, positions_are_int64 ? 64 : 32);
    call.positions = remember(&tpositions, (size_t)n * (positions_are_int64 ? 8 : 4));
  }
  num_sequences = (int)next(in);
  if (num_sequences) {
    if (num_sequences >= 63) return 105;
    for (i = 0; i <= num_sequences; ++i) cu[i] = next(in);
    cu_int64 = (int)next(in);
    cu_data = malloc(sizeof(int64_t) * (size_t)(num_sequences + 1));
    for (i = 0; i <= num_sequences; ++i) {
      if (cu_int64) ((int64_t *)cu_data)[i] = cu[i];
      else ((int32_t *)cu_data)[i] = (int32_t)cu[i];
    }
    cu_shape[0] = num_sequences + 1;
    tcu = tensor(cu_data, 1, cu_shape, NULL, ROPEGEN_DTYPE_INT, cu_int64 ? 64 : 32);
    call.cu_seqlens = remember(&tcu, sizeof(int64_t) * (size_t)(num_sequences + 1));
  }
  call.offset = next(in);
  call.seq_len = next(in);
  call.backward = (int32_t)next(in);
  cache_shape[0] = next(in);
  cache_shape[1] = next(in);
  if (cache_shape[0]) {
    cache = read_file("cos_sin_cache.bin", (size_t)(cache_shape[0] * cache_shape[1]) * 4);
    tcache = tensor(cache, 2, cache_shape, NULL, ROPEGEN_DTYPE_FLOAT, 32);
    call.cos_sin_cache = remember(&tcache, (size_t)(cache_shape[0] * cache_shape[1]) * 4);
  }
  device_type = 0;
  if (fscanf(in, "%d %d", &device_type, &device_id) == 2) use_device(device_type, device_id);
  fclose(in);

  /* fp8 outputs: uint8 codes, the scales with the call. */
  out_code = code, out_bits = bits, out_bytes = bytes;
  if (exists("fp8_outputs")) {
    snprintf(path, sizeof path, "%s/fp8_outputs", dir);
    if (!(in = fopen(path, "r")) || fscanf(in, "%f %f", &call.q_scale, &call.k_scale) != 2) return 109;
    fclose(in);
    out_code = ROPEGEN_DTYPE_UINT, out_bits = 8, out_bytes = 1;
  }
  if (exists("quant_group")) { /* output_quant: q's group scales, dense */
    int64_t n = 1;
    snprintf(path, sizeof path, "%s/quant_group", dir);
    if (!(in = fopen(path, "r")) || fscanf(in, "%d", &group) != 1 || group < 1) return 110;
    fclose(in);
    for (i = 0; i < rank; ++i) n *= scales_shape[i] = i == rank - 1 ? q_shape[i] / group : q_shape[i];
    scales = (float *)calloc((size_t)n, sizeof(float));
    tscales = tensor(scales, rank, scales_shape, NULL, ROPEGEN_DTYPE_FLOAT, 32);
    call.out_scales = remember(&tscales, (size_t)n * sizeof(float));
  }
  q = read_file("q.bin", (size_t)q_elements * bytes);
  tq = tensor(q, rank, q_shape, q_strides, code, bits);
  call.q = remember(&tq, (size_t)q_elements * bytes);
  if (!in_place) {
    out_q = read_file("out_q.bin", (size_t)q_elements * out_bytes);
    tout_q = tensor(out_q, rank, q_shape, q_strides, out_code, out_bits);
    call.out_q = remember(&tout_q, (size_t)q_elements * out_bytes);
  } else {
    out_q = q; /* out_q NULL: in place */
  }
  if (has_k) {
    k = read_file("k.bin", (size_t)k_elements * bytes);
    tk = tensor(k, rank, k_shape, k_strides, code, bits);
    call.k = remember(&tk, (size_t)k_elements * bytes);
    if (!in_place) {
      out_k = read_file("out_k.bin", (size_t)k_elements * out_bytes);
      tout_k = tensor(out_k, rank, k_shape, k_strides, out_code, out_bits);
      call.out_k = remember(&tout_k, (size_t)k_elements * out_bytes);
    } else {
      out_k = k;
    }
  }
  /* qk_norm: the weights, the backward's saved inputs and the weights' gradients. */
  head_dim[0] = q_shape[rank - 1];
  weight_f32 = exists("float32_norm_weights");
  for (i = 0; i < 1 + has_k; ++i) {
    const char *weight_file = i ? "k_norm_weight.bin" : "q_norm_weight.bin";
    const int64_t elements = i ? k_elements : q_elements;
    if (exists(i ? "saved_k.bin" : "saved_q.bin")) {
      tsaved[i] = tensor(read_file(i ? "saved_k.bin" : "saved_q.bin", (size_t)elements * bytes), rank,
                         i ? k_shape : q_shape, i ? k_strides : q_strides, code, bits);
      *(i ? &call.saved_k : &call.saved_q) = remember(&tsaved[i], (size_t)elements * bytes);
    }
    if (!exists(weight_file)) continue;
    weight_bytes = (size_t)head_dim[0] * (weight_f32 ? 4 : (size_t)bytes);
    tweight[i] = tensor(read_file(weight_file, weight_bytes), 1, head_dim, NULL, weight_f32 ? ROPEGEN_DTYPE_FLOAT : code,
                        weight_f32 ? 32 : bits);
    *(i ? &call.k_norm_weight : &call.q_norm_weight) = remember(&tweight[i], weight_bytes);
    if (!call.backward) continue;
    d_weight[i] = read_file(i ? "d_k_norm_weight.bin" : "d_q_norm_weight.bin", (size_t)head_dim[0] * 4);
    td_weight[i] = tensor(d_weight[i], 1, head_dim, NULL, ROPEGEN_DTYPE_FLOAT, 32);
    *(i ? &call.d_k_norm_weight : &call.d_q_norm_weight) = remember(&td_weight[i], (size_t)head_dim[0] * 4);
  }
  for (i = 0; i < num_tensors; ++i) {
    tensors[i].tensor->device = call_device;
    tensors[i].tensor->data = to_device(tensors[i].host, tensors[i].bytes);
  }
  /* ROPE_DRIVER_STREAM: the call's stream (a number); ROPE_DRIVER_REPEAT: the
   * same call n times, each announced by a line "call i" appended to the file
   * ROPE_DRIVER_MARKS, and "end" after the last (tests with a stub CUDA
   * driver: stub_libcuda.c). */
  if (getenv("ROPE_DRIVER_STREAM")) call.stream = (void *)(uintptr_t)strtoull(getenv("ROPE_DRIVER_STREAM"), NULL, 0);
  repeat = getenv("ROPE_DRIVER_REPEAT") ? atoi(getenv("ROPE_DRIVER_REPEAT")) : 1;
  for (i = 0, rc = ROPEGEN_OK; i < repeat && rc == ROPEGEN_OK; ++i) {
    if (getenv("ROPE_DRIVER_MARKS")) {
      FILE *marks = fopen(getenv("ROPE_DRIVER_MARKS"), "a");
      if (!marks) return 108;
      fprintf(marks, "call %d\n", i);
      fclose(marks);
    }
    rc = RUN_FN(&call, &message);
  }
  if (getenv("ROPE_DRIVER_MARKS")) {
    FILE *marks = fopen(getenv("ROPE_DRIVER_MARKS"), "a");
    if (!marks) return 108;
    fprintf(marks, "end\n");
    fclose(marks);
  }
  if (rc == ROPEGEN_OK) {
    fetch(out_q);
    if (scales) fetch(scales);
    if (has_k) fetch(out_k);
    for (i = 0; i < 2; ++i)
      if (d_weight[i]) fetch(d_weight[i]);
  }
  write_file("result_q.bin", out_q, (size_t)q_elements * out_bytes);
  if (has_k) write_file("result_k.bin", out_k, (size_t)k_elements * out_bytes);
  if (scales) write_file("result_scales.bin", scales, (size_t)q_elements / (size_t)group * sizeof(float));
  for (i = 0; i < 2; ++i)
    if (d_weight[i])
      write_file(i ? "result_d_k_norm_weight.bin" : "result_d_q_norm_weight.bin", d_weight[i], (size_t)head_dim[0] * 4);
  printf("rc=%d\n", rc);
  if (rc != ROPEGEN_OK) printf("%s: %s\n", ropegen_status_string(rc), message.text);
  return 0;
}
