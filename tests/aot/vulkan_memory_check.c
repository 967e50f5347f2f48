/* An AOT library's Vulkan memory across allocations: bytes written at an
 * offset into one allocation (through a crop of it) survive the next
 * allocations and their copies, and a freed allocation's memory is reused
 * without touching live ones. Halide 21's allocator frees a region when its
 * last crop is released unless the library holds one (vulkan_hooks.cpp).
 * Compiled by aot_build_test.cpp: -DROPE_HEADER='"name.h"' -DROPE_NAME=name.
 * Prints "ok" or what went wrong. */
#include <stdio.h>
#include <string.h>

#include ROPE_HEADER

#define PASTE2(a, b) a##b
#define PASTE(a, b) PASTE2(a, b)
#define FN(suffix) PASTE(ROPE_NAME, suffix)

static int check(int status, const ropegen_message *m, const char *what) {
  if (status != ROPEGEN_OK) printf("%s failed (%d): %s\n", what, status, m->text);
  return status != ROPEGEN_OK;
}

int main(void) {
  ropegen_message m;
  void *a, *b, *c;
  unsigned char in[1024], other[4096], out[1024];
  int i, bad = 0;
  for (i = 0; i < 1024; ++i) in[i] = (unsigned char)(i * 7 + 1);
  memset(other, 0xab, sizeof other);
  if (check(FN(_device_alloc)(4096, &a, &m), &m, "alloc a") ||
      check(FN(_copy_to_device)((char *)a + 256, in, 1024, &m), &m, "copy into a + 256") ||
      check(FN(_device_alloc)(4096, &b, &m), &m, "alloc b") ||
      check(FN(_copy_to_device)(b, other, 4096, &m), &m, "copy into b") ||
      check(FN(_device_free)(b, &m), &m, "free b") ||
      check(FN(_device_alloc)(4096, &c, &m), &m, "alloc c") ||
      check(FN(_copy_to_device)((char *)c + 512, other, 2048, &m), &m, "copy into c + 512") ||
      check(FN(_copy_to_host)(out, (char *)a + 256, 1024, &m), &m, "copy from a + 256"))
    return 1;
  for (i = 0; i < 1024; ++i) bad += out[i] != in[i];
  if (bad) {
    printf("%d of a's 1024 bytes changed by other allocations' copies\n", bad);
    return 1;
  }
  if (check(FN(_device_free)(a, &m), &m, "free a") || check(FN(_device_free)(c, &m), &m, "free c")) return 1;
  printf(FN(_device_free)(a, &m) == ROPEGEN_ERROR_INVALID_ARGUMENT ? "ok\n" : "a freed twice\n");
  return 0;
}
