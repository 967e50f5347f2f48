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
 *   cache_rows cache_columns (0 0: no cos_sin_cache)
 * and DIR/{q,k,out_q,out_k,positions,cos_sin_cache}.bin the raw data (out_*: the output
 * buffers' initial contents). Writes DIR/result_{q,k}.bin (the output
 * buffers after the call) and prints "rc=N", then the message if N != 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include ROPE_HEADER

#include "driver_common.h"

static int64_t next(FILE *f) {
  long v;
  if (fscanf(f, "%ld", &v) != 1) exit(102);
  return (int64_t)v;
}


int main(int argc, char **argv) {
  int64_t q_shape[4], q_strides[4], k_shape[4], k_strides[4], positions_shape[3], cu_shape[1], cache_shape[2];
  int64_t q_elements, k_elements = 0, cu[64];
  int code, bits, bytes, rank, has_k, in_place, positions_rank, positions_are_int64 = 0, num_sequences, i, rc;
  int cu_int64 = 0;
  void *q, *k = NULL, *out_q, *out_k = NULL, *positions = NULL, *cu_data = NULL, *cache = NULL;
  ropegen_tensor tq, tk, tout_q, tout_k, tpositions, tcu, tcache;
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
    call.positions = &tpositions;
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
    call.cu_seqlens = &tcu;
  }
  call.offset = next(in);
  call.seq_len = next(in);
  call.backward = (int32_t)next(in);
  cache_shape[0] = next(in);
  cache_shape[1] = next(in);
  if (cache_shape[0]) {
    cache = read_file("cos_sin_cache.bin", (size_t)(cache_shape[0] * cache_shape[1]) * 4);
    tcache = tensor(cache, 2, cache_shape, NULL, ROPEGEN_DTYPE_FLOAT, 32);
    call.cos_sin_cache = &tcache;
  }
  fclose(in);

  q = read_file("q.bin", (size_t)q_elements * bytes);
  tq = tensor(q, rank, q_shape, q_strides, code, bits);
  call.q = &tq;
  if (!in_place) {
    out_q = read_file("out_q.bin", (size_t)q_elements * bytes);
    tout_q = tensor(out_q, rank, q_shape, q_strides, code, bits);
    call.out_q = &tout_q;
  } else {
    out_q = q; /* out_q NULL: in place */
  }
  if (has_k) {
    k = read_file("k.bin", (size_t)k_elements * bytes);
    tk = tensor(k, rank, k_shape, k_strides, code, bits);
    call.k = &tk;
    if (!in_place) {
      out_k = read_file("out_k.bin", (size_t)k_elements * bytes);
      tout_k = tensor(out_k, rank, k_shape, k_strides, code, bits);
      call.out_k = &tout_k;
    } else {
      out_k = k;
    }
  }
  rc = RUN_FN(&call, &message);
  write_file("result_q.bin", out_q, (size_t)q_elements * bytes);
  if (has_k) write_file("result_k.bin", out_k, (size_t)k_elements * bytes);
  printf("rc=%d\n", rc);
  if (rc != ROPEGEN_OK) printf("%s: %s\n", ropegen_status_string(rc), message.text);
  return 0;
}
