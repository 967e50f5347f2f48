/* A stub CUDA driver, built by aot_build_test.cpp as a shared object named
 * libcuda.so.1 and found through LD_LIBRARY_PATH: it runs no kernel and
 * computes nothing. It answers the driver API calls an AOT library's Halide
 * runtime and its hooks make (two devices, sm_90; every call succeeds) and
 * appends one line per call to the file $ROPEGEN_STUB_CUDA_LOG, so that a
 * test sees, without a GPU, which library was loaded, which context the
 * kernels were pushed in, which stream they were launched on, and what a
 * call allocates, copies and synchronises. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static FILE *log_file(void) {
  static FILE *f;
  if (!f) {
    const char *path = getenv("ROPEGEN_STUB_CUDA_LOG");
    f = fopen(path ? path : "/dev/null", "a");
    if (!f) abort();
  }
  return f;
}

static CUresult note(const char *format, ...) {
  va_list args;
  FILE *f = log_file();
  va_start(args, format);
  vfprintf(f, format, args);
  va_end(args);
  fputc('\n', f);
  fflush(f);
  return 0;
}

enum { kDevices = 2 };
static void *context_of(int device) { return (void *)(uintptr_t)(0xc0000 + device); }
static CUdeviceptr next_address = 0x700000000000ull;
static int current_device;

CUresult cuInit(unsigned flags) { return note("cuInit"); }
CUresult cuGetErrorName(CUresult e, const char **name) { *name = "CUDA_ERROR_STUB"; return 0; }
CUresult cuDeviceGetCount(int *count) { *count = kDevices; return 0; }
CUresult cuDeviceGet(int *device, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *device = ordinal;
  return 0;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
  *value = attribute == 75 ? 9 : attribute == 76 ? 0 : 1024; /* capability 9.0; limits */
  return 0;
}
CUresult cuDeviceGetName(char *name, int length, int device) {
  snprintf(name, (size_t)length, "stub %d", device);
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int device) { *bytes = (size_t)1 << 34; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **context, int device) {
  *context = context_of(device);
  return note("cuDevicePrimaryCtxRetain device=%d", device);
}
CUresult cuCtxCreate_v2(void **context, unsigned flags, int device) {
  *context = (void *)(uintptr_t)0xbad0;
  return note("cuCtxCreate_v2 device=%d", device);
}
CUresult cuCtxDestroy_v2(void *context) { return note("cuCtxDestroy_v2 %p", context); }
CUresult cuCtxSetCurrent(void *context) { return 0; }
CUresult cuCtxPushCurrent_v2(void *context) {
  current_device = (int)((uintptr_t)context - 0xc0000);
  return note("cuCtxPushCurrent_v2 %p", context);
}
CUresult cuCtxPopCurrent_v2(void **context) {
  if (context) *context = context_of(current_device);
  return 0;
}
CUresult cuCtxGetDevice(int *device) { *device = current_device; return 0; }
CUresult cuCtxGetApiVersion(void *context, unsigned *version) { *version = 12000; return 0; }
CUresult cuProfilerStop(void) { return 0; }
CUresult cuModuleLoadData(void **module, const void *image) {
  *module = (void *)(uintptr_t)0xd000;
  return note("cuModuleLoadData");
}
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values) {
  *module = (void *)(uintptr_t)0xd000;
  return note("cuModuleLoadDataEx ptx=%d", strstr((const char *)image, ".target sm_") != NULL);
}
CUresult cuModuleUnload(void *module) { return 0; }
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  *function = (void *)(uintptr_t)0xf000;
  return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  *pointer = next_address;
  next_address += (bytes + 255) / 256 * 256 + 256;
  return note("cuMemAlloc_v2 %zu", bytes);
}
CUresult cuMemFree_v2(CUdeviceptr pointer) { return note("cuMemFree_v2"); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr to, const void *from, size_t bytes) { return note("cuMemcpyHtoD_v2 %zu", bytes); }
CUresult cuMemcpyDtoH_v2(void *to, CUdeviceptr from, size_t bytes) { return note("cuMemcpyDtoH_v2 %zu", bytes); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr to, CUdeviceptr from, size_t bytes) { return note("cuMemcpyDtoD_v2 %zu", bytes); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr to, const void *from, size_t bytes, void *stream) {
  return note("cuMemcpyHtoDAsync_v2 %zu stream=%p", bytes, stream);
}
CUresult cuMemcpyDtoHAsync_v2(void *to, CUdeviceptr from, size_t bytes, void *stream) {
  return note("cuMemcpyDtoHAsync_v2 %zu stream=%p", bytes, stream);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr to, CUdeviceptr from, size_t bytes, void *stream) {
  return note("cuMemcpyDtoDAsync_v2 %zu stream=%p", bytes, stream);
}
CUresult cuMemcpy3D_v2(const void *copy) { return note("cuMemcpy3D_v2"); }
CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
  return note("cuLaunchKernel device=%d stream=%p", current_device, stream);
}
CUresult cuCtxSynchronize(void) { return note("cuCtxSynchronize"); }
CUresult cuStreamSynchronize(void *stream) { return note("cuStreamSynchronize stream=%p", stream); }
CUresult cuPointerGetAttribute(void *result, int attribute, CUdeviceptr pointer) {
  memset(result, 0, sizeof(void *));
  return 0;
}
