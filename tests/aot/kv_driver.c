/* Calls <name>_run() of an AOT library of a kv_cache spec (layout thd,
 * float32 tensors, paged_hnd caches of uint8 fp8 codes) as a C user would.
 * Compiled by aot_build_test.cpp against only the files `rope-gen build`
 * produced: -DROPE_HEADER='"name.h"' -DRUN_FN=name_run
 * Usage: kv_driver DIR. DIR/call.txt holds, in this order:
 *   T Hq Hk D Dv pages page_size num_indices num_requests has_v has_out_k
 *   positions_are_int64 k_scale v_scale
 * and DIR/{q,k,v,positions,kv_indices,kv_indptr,batch_indices,k_cache,v_cache}.bin
 * the raw data (q, k, v float32; ids int32, positions int64 when so marked;
 * caches uint8 [pages, Hk, page_size, D or Dv]). q is rotated in place.
 * Writes DIR/result_{q,out_k,k_cache,v_cache}.bin and prints "rc=N", then
 * the message if N != 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include ROPE_HEADER

#include "driver_common.h"


int main(int argc, char **argv) {
  long T, Hq, Hk, D, Dv, pages, page_size, num_indices, num_requests, has_v, has_out_k, positions_int64;
  double k_scale, v_scale;
  int64_t q_shape[3], k_shape[3], v_shape[3], t_shape[1], indices_shape[1], indptr_shape[1], kc_shape[4], vc_shape[4];
  size_t k_cache_bytes, v_cache_bytes;
  void *q, *k, *v = NULL, *out_k = NULL, *positions, *kv_indices, *kv_indptr, *batch_indices, *k_cache, *v_cache = NULL;
  ropegen_tensor tq, tk, tv, tout_k, tpositions, tindices, tindptr, tbatch, tkc, tvc;
  ropegen_call call;
  ropegen_message message;
  char path[8192];
  FILE *in;
  int rc;
  if (argc != 2) return 103;
  snprintf(dir, sizeof dir, "%s", argv[1]);
  snprintf(path, sizeof path, "%s/call.txt", dir);
  if (!(in = fopen(path, "r"))) return 104;
  if (fscanf(in, "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %lf %lf", &T, &Hq, &Hk, &D, &Dv, &pages, &page_size,
             &num_indices, &num_requests, &has_v, &has_out_k, &positions_int64, &k_scale, &v_scale) != 14)
    return 102;
  fclose(in);
  memset(&call, 0, sizeof call);

  q_shape[0] = T, q_shape[1] = Hq, q_shape[2] = D;
  k_shape[0] = T, k_shape[1] = Hk, k_shape[2] = D;
  v_shape[0] = T, v_shape[1] = Hk, v_shape[2] = Dv;
  t_shape[0] = T, indices_shape[0] = num_indices, indptr_shape[0] = num_requests + 1;
  kc_shape[0] = pages, kc_shape[1] = Hk, kc_shape[2] = page_size, kc_shape[3] = D;
  vc_shape[0] = pages, vc_shape[1] = Hk, vc_shape[2] = page_size, vc_shape[3] = Dv;
  k_cache_bytes = (size_t)(pages * Hk * page_size * D);
  v_cache_bytes = (size_t)(pages * Hk * page_size * Dv);

  q = read_file("q.bin", (size_t)(T * Hq * D) * 4);
  k = read_file("k.bin", (size_t)(T * Hk * D) * 4);
  positions = read_file("positions.bin", (size_t)T * (positions_int64 ? 8 : 4));
  kv_indices = read_file("kv_indices.bin", (size_t)num_indices * 4);
  kv_indptr = read_file("kv_indptr.bin", (size_t)(num_requests + 1) * 4);
  batch_indices = read_file("batch_indices.bin", (size_t)T * 4);
  k_cache = read_file("k_cache.bin", k_cache_bytes);
  tq = tensor(q, 3, q_shape, NULL, ROPEGEN_DTYPE_FLOAT, 32);
  tk = tensor(k, 3, k_shape, NULL, ROPEGEN_DTYPE_FLOAT, 32);
  tpositions = tensor(positions, 1, t_shape, NULL, ROPEGEN_DTYPE_INT, positions_int64 ? 64 : 32);
  tindices = tensor(kv_indices, 1, indices_shape, NULL, ROPEGEN_DTYPE_INT, 32);
  tindptr = tensor(kv_indptr, 1, indptr_shape, NULL, ROPEGEN_DTYPE_INT, 32);
  tbatch = tensor(batch_indices, 1, t_shape, NULL, ROPEGEN_DTYPE_INT, 32);
  tkc = tensor(k_cache, 4, kc_shape, NULL, ROPEGEN_DTYPE_UINT, 8);
  call.q = &tq; /* out_q NULL: in place */
  call.k = &tk;
  call.positions = &tpositions;
  call.kv_indices = &tindices;
  call.kv_indptr = &tindptr;
  call.batch_indices = &tbatch;
  call.k_cache = &tkc;
  if (has_v) {
    v = read_file("v.bin", (size_t)(T * Hk * Dv) * 4);
    v_cache = read_file("v_cache.bin", v_cache_bytes);
    tv = tensor(v, 3, v_shape, NULL, ROPEGEN_DTYPE_FLOAT, 32);
    tvc = tensor(v_cache, 4, vc_shape, NULL, ROPEGEN_DTYPE_UINT, 8);
    call.v = &tv;
    call.v_cache = &tvc;
  }
  if (has_out_k) {
    out_k = calloc((size_t)(T * Hk * D), 4);
    tout_k = tensor(out_k, 3, k_shape, NULL, ROPEGEN_DTYPE_FLOAT, 32);
    call.out_k = &tout_k;
  }
  call.k_scale = (float)k_scale;
  call.v_scale = (float)v_scale;

  rc = RUN_FN(&call, &message);
  write_file("result_q.bin", q, (size_t)(T * Hq * D) * 4);
  write_file("result_k_cache.bin", k_cache, k_cache_bytes);
  if (has_v) write_file("result_v_cache.bin", v_cache, v_cache_bytes);
  if (has_out_k) write_file("result_out_k.bin", out_k, (size_t)(T * Hk * D) * 4);
  printf("rc=%d\n", rc);
  if (rc != ROPEGEN_OK) printf("%s: %s\n", ropegen_status_string(rc), message.text);
  return 0;
}
