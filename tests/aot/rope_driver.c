/* Calls <name>_rope() of a built AOT library exactly as a C user would,
 * with the inputs aot_build_test.cpp wrote; compiled by that test with the
 * system C compiler against only the files `rope-gen build` produced.
 *   -DROPE_HEADER='"name.h"' -DROPE_FN=name_rope -DELEMENT_BYTES=4|2
 * Usage: rope_driver DIR. DIR/call.txt holds integers in this order:
 *   rank, q_shape[rank], q_strides[rank], q_elements,
 *   has_k [k_shape[rank], k_strides[rank], k_elements], in_place,
 *   positions_rank [positions_shape[rank], positions_are_int64],
 *   num_sequences [cu_seqlens[num_sequences + 1]], offset, seq_len
 * and DIR/{q,k,out_q,out_k,positions}.bin the raw data (out_*: the output
 * buffers' initial contents). Writes DIR/result_{q,k}.bin (the output
 * buffers after the call) and prints the return code. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include ROPE_HEADER

static char dir[4096];

static void *read_file(const char *name, size_t bytes) {
  char path[8192];
  FILE *f;
  void *data = calloc(bytes ? bytes : 1, 1);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "rb");
  if (!f || fread(data, 1, bytes, f) != bytes) {
    fprintf(stderr, "cannot read %zu bytes from %s\n", bytes, path);
    exit(100);
  }
  fclose(f);
  return data;
}

static void write_file(const char *name, const void *data, size_t bytes) {
  char path[8192];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (!f || fwrite(data, 1, bytes, f) != bytes) exit(101);
  fclose(f);
}

static int64_t next(FILE *f) {
  long long v;
  if (fscanf(f, "%lld", &v) != 1) exit(102);
  return (int64_t)v;
}

int main(int argc, char **argv) {
  int64_t q_shape[4], q_strides[4], k_shape[4], k_strides[4], positions_shape[2];
  int64_t q_elements, k_elements = 0, offset, seq_len;
  int rank, has_k, in_place, positions_rank, positions_are_int64 = 0, num_sequences, i, rc;
  void *q, *k = NULL, *out_q, *out_k = NULL, *positions = NULL;
  int32_t *cu_seqlens = NULL;
  FILE *call;
  char path[8192];
  if (argc != 2) return 103;
  snprintf(dir, sizeof dir, "%s", argv[1]);
  snprintf(path, sizeof path, "%s/call.txt", dir);
  if (!(call = fopen(path, "r"))) return 104;

  rank = (int)next(call);
  for (i = 0; i < rank; ++i) q_shape[i] = next(call);
  for (i = 0; i < rank; ++i) q_strides[i] = next(call);
  q_elements = next(call);
  has_k = (int)next(call);
  if (has_k) {
    for (i = 0; i < rank; ++i) k_shape[i] = next(call);
    for (i = 0; i < rank; ++i) k_strides[i] = next(call);
    k_elements = next(call);
  }
  in_place = (int)next(call);
  positions_rank = (int)next(call);
  if (positions_rank) {
    int64_t n = 1;
    for (i = 0; i < positions_rank; ++i) n *= positions_shape[i] = next(call);
    positions_are_int64 = (int)next(call);
    positions = read_file("positions.bin", (size_t)n * (positions_are_int64 ? 8 : 4));
  }
  num_sequences = (int)next(call);
  if (num_sequences) {
    cu_seqlens = (int32_t *)malloc(sizeof(int32_t) * (size_t)(num_sequences + 1));
    for (i = 0; i <= num_sequences; ++i) cu_seqlens[i] = (int32_t)next(call);
  }
  offset = next(call);
  seq_len = next(call);
  fclose(call);

  q = read_file("q.bin", (size_t)q_elements * ELEMENT_BYTES);
  out_q = in_place ? q : read_file("out_q.bin", (size_t)q_elements * ELEMENT_BYTES);
  if (has_k) {
    k = read_file("k.bin", (size_t)k_elements * ELEMENT_BYTES);
    out_k = in_place ? k : read_file("out_k.bin", (size_t)k_elements * ELEMENT_BYTES);
  }
  rc = ROPE_FN(q, out_q, q_shape, q_strides, k, out_k, k_shape, k_strides, positions, positions_are_int64,
               positions_shape, positions_rank, cu_seqlens, num_sequences, offset, seq_len);
  write_file("result_q.bin", out_q, (size_t)q_elements * ELEMENT_BYTES);
  if (has_k) write_file("result_k.bin", out_k, (size_t)k_elements * ELEMENT_BYTES);
  printf("rc=%d\n", rc);
  return 0;
}
