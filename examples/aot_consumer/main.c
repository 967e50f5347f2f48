/* A C program using the AOT library of examples/llama3_8b.yaml, built with
 *   rope-gen build examples/llama3_8b.yaml -o DIR
 * It describes a small deterministic q and k (bshd, bf16, GQA: k has fewer
 * heads) as ropegen_tensors, rotates them out of place at positions 7..
 * (decode after 7 cached tokens) with one llama3_8b_run() call, and checks
 * every element against an inline float64 transcription of Hugging Face's
 * llama3 RoPE. Prints PASS/FAIL and the max error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "llama3_8b.h"

enum { B = 2, S = 5, H = 4, HK = 2, D = LLAMA3_8B_HEAD_DIM };
#define OFFSET 7
#define PI 3.14159265358979323846

static uint16_t to_bf16(float f) { /* round to nearest even */
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* HF _compute_llama3_parameters: theta 500000, factor 8, low 1, high 4, original 8192. */
static double inv_freq(int i) {
  const double base = pow(500000.0, -2.0 * i / D), factor = 8, low = 1, high = 4, original = 8192;
  const double wavelen = 2 * PI / base;
  if (wavelen < original / high) return base;
  if (wavelen > original / low) return base / factor;
  {
    const double smooth = (original / wavelen - low) / (high - low);
    return (1 - smooth) * base / factor + smooth * base;
  }
}

/* rotate_half pairing: dim i pairs with i + D/2. Tensors are [B, S, heads, D]. */
static double reference(const uint16_t *x, int heads, int b, int s, int h, int d) {
  const uint16_t *row = x + (((size_t)b * S + s) * heads + h) * D;
  const int i = d % (D / 2);
  const double angle = (OFFSET + s) * inv_freq(i), c = cos(angle), sn = sin(angle);
  const double x0 = from_bf16(row[i]), x1 = from_bf16(row[i + D / 2]);
  return d < D / 2 ? x0 * c - x1 * sn : x1 * c + x0 * sn;
}

static double check(const uint16_t *in, const uint16_t *out, int heads, int *bad) {
  double max_error = 0;
  int b, s, h, d;
  for (b = 0; b < B; ++b)
    for (s = 0; s < S; ++s)
      for (h = 0; h < heads; ++h)
        for (d = 0; d < D; ++d) {
          const double want = reference(in, heads, b, s, h, d);
          const double got = from_bf16(out[(((size_t)b * S + s) * heads + h) * D + d]);
          const double error = fabs(got - want);
          if (error > max_error) max_error = error;
          if (error > ldexp(fabs(want), -8) + 1e-5) ++*bad; /* one bf16 rounding */
        }
  return max_error;
}

/* A dense bf16 tensor on the CPU (strides NULL: row-major). */
static ropegen_tensor bf16_tensor(void *data, int64_t *shape) {
  ropegen_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = ROPEGEN_DEVICE_CPU;
  t.ndim = 4;
  t.dtype.code = ROPEGEN_DTYPE_BFLOAT;
  t.dtype.bits = 16;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

int main(void) {
  static uint16_t q[B * S * H * D], k[B * S * HK * D], out_q[B * S * H * D], out_k[B * S * HK * D];
  int64_t q_shape[4] = {B, S, H, D}, k_shape[4] = {B, S, HK, D};
  ropegen_tensor tq = bf16_tensor(q, q_shape), tk = bf16_tensor(k, k_shape);
  ropegen_tensor tout_q = bf16_tensor(out_q, q_shape), tout_k = bf16_tensor(out_k, k_shape);
  ropegen_call call;
  ropegen_message message;
  int i, bad = 0, status;
  double max_error;
  for (i = 0; i < B * S * H * D; ++i) q[i] = to_bf16((float)sin(0.37 * i + 0.1));
  for (i = 0; i < B * S * HK * D; ++i) k[i] = to_bf16((float)cos(0.23 * i - 0.4));

  memset(&call, 0, sizeof call); /* positions NULL: implicit (offset + index) */
  call.q = &tq;
  call.k = &tk;
  call.out_q = &tout_q;
  call.out_k = &tout_k;
  call.offset = OFFSET;
  status = llama3_8b_run(&call, &message);
  if (status != ROPEGEN_OK) {
    printf("FAIL: llama3_8b_run returned %d (%s): %s\n", status, ropegen_status_string(status), message.text);
    return 1;
  }
  max_error = check(q, out_q, H, &bad);
  {
    const double k_error = check(k, out_k, HK, &bad);
    if (k_error > max_error) max_error = k_error;
  }
  printf("%s: llama3_8b_run on q [%d, %d, %d, %d] and k [%d, %d, %d, %d] (bf16), max error %.3g, %d out of tolerance\n",
         bad ? "FAIL" : "PASS", B, S, H, D, B, S, HK, D, max_error, bad);
  return bad ? 1 : 0;
}
