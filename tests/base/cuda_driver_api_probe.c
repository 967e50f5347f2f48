/* Loads the CUDA driver through base/cuda_driver_api.h as its users do and
 * prints what the loader found, one line per set of needed entry points
 * (cuda_driver_api_test.cpp builds it as C99 and as C++ and runs it against
 * stub drivers). argv[1]: the loader's options. */
#include <stdio.h>
#include <stdlib.h>

#include "base/cuda_driver_api.h"

static void report(const ropegen_cuda_driver *d, int ok) {
  int count = -1;
  if (ok) d->cuDeviceGetCount(&count);
  printf("ok=%d library=%s missing=%s cuMemAlloc_v2=%s cuEventCreate=%s devices=%d\n", ok,
         d->library ? "yes" : "no", d->missing ? d->missing : "-", d->cuMemAlloc_v2 ? "yes" : "no",
         d->cuEventCreate ? "yes" : "no", count);
}

int main(int argc, char **argv) {
  const int options = argc > 1 ? atoi(argv[1]) : 0;
  ropegen_cuda_driver d;
  report(&d, ropegen_cuda_driver_load(&d,
                                      ROPEGEN_CUDA_NEEDS(cuInit) | ROPEGEN_CUDA_NEEDS(cuDeviceGetCount) |
                                          ROPEGEN_CUDA_NEEDS(cuMemAlloc_v2) | ROPEGEN_CUDA_NEEDS(cuCtxPushCurrent_v2),
                                      options));
  /* The stub has neither; the table's order decides which is named. */
  report(&d, ropegen_cuda_driver_load(&d, ROPEGEN_CUDA_NEEDS(cuEventCreate) | ROPEGEN_CUDA_NEEDS(cuDriverGetVersion),
                                      options));
  return 0;
}
