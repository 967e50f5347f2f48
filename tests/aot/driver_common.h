/* What the AOT C drivers (rope_driver.c, kv_driver.c) share: raw bytes in
 * and out of the directory named on their command line, and CPU tensors.
 * Included after the library's header (ropegen_tensor). */
#ifndef ROPEGEN_TESTS_AOT_DRIVER_COMMON_H
#define ROPEGEN_TESTS_AOT_DRIVER_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[4096];

static void *read_file(const char *name, size_t bytes) {
  char path[8192];
  FILE *f;
  void *data = calloc(bytes ? bytes : 1, 1);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "rb");
  if (!f || fread(data, 1, bytes, f) != bytes) {
    fprintf(stderr, "cannot read %lu bytes from %s\n", (unsigned long)bytes, path);
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

/* A CPU tensor over `data` (strides NULL: row-major). */
static ropegen_tensor tensor(void *data, int ndim, int64_t *shape, int64_t *strides, int code, int bits) {
  ropegen_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = ROPEGEN_DEVICE_CPU;
  t.ndim = ndim;
  t.dtype.code = (uint8_t)code;
  t.dtype.bits = (uint8_t)bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = strides;
  return t;
}

#endif
