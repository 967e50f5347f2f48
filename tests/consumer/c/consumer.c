/* A C99 program using an AOT library with nothing but what `rope-gen build`
 * wrote: one <name>_run() call on q [1, 2, 1, 4] (f32, bshd) at positions
 * 3, 4, and one value checked: dim 0 of token 1 is x0 cos(4) - x2 sin(4)
 * (half pairing, inv_freq 1 for pair 0). Exit 0 and "PASS" when it holds. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "consumer_c.h"

int main(void) {
  float q[8] = {1, 2, 3, 4, 0.5f, -1, 2, 0.25f};
  int64_t shape[4] = {1, 2, 1, CONSUMER_C_HEAD_DIM};
  ropegen_tensor tq;
  ropegen_call call;
  ropegen_message message;
  double want;
  int status;
  memset(&tq, 0, sizeof tq);
  tq.data = q;
  tq.device.device_type = ROPEGEN_DEVICE_CPU;
  tq.ndim = 4;
  tq.dtype.code = ROPEGEN_DTYPE_FLOAT;
  tq.dtype.bits = 32;
  tq.dtype.lanes = 1;
  tq.shape = shape;
  memset(&call, 0, sizeof call);
  call.q = &tq; /* out_q NULL: in place */
  call.offset = 3;
  want = 0.5 * cos(4.0) - 2.0 * sin(4.0);
  status = consumer_c_run(&call, &message);
  if (status != ROPEGEN_OK) {
    printf("FAIL: %s: %s\n", ropegen_status_string(status), message.text);
    return 1;
  }
  if (fabs(q[4] - want) > 1e-5) {
    printf("FAIL: q[0, 1, 0, 0] = %.7f, want %.7f\n", q[4], want);
    return 1;
  }
  printf("PASS: q[0, 1, 0, 0] = %.7f\n", q[4]);
  return 0;
}
