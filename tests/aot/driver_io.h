/* File input and output of the AOT C drivers (rope_driver.c, kv_driver.c):
 * raw bytes under the directory named on their command line. */
#ifndef ROPEGEN_TESTS_AOT_DRIVER_IO_H
#define ROPEGEN_TESTS_AOT_DRIVER_IO_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
