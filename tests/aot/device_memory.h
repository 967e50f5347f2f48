/* Device memory for the AOT C drivers: a call's tensors on the device
 * named in call.txt (ropegen_device). Included after driver_common.h.
 *   cpu   the host buffers themselves.
 *   cuda  copies in CUDA device memory (the CUDA driver API through dlopen of
 *         libcuda.so.1, in the device's primary context, as the library's
 *         kernels run) when this machine has a driver and a device; without
 *         one the host pointers go labelled cuda: the library must refuse the
 *         call before touching them (what a test checks on a machine without
 *         a GPU).
 *   vulkan  memory the library allocates (ROPE_VULKAN_MEMORY defined, with
 *         ROPE_NAME the library's name: <name>_device_alloc and its copies),
 *         one allocation per tensor (at ROPE_DRIVER_VULKAN_OFFSET bytes in).
 * to_device() gives the tensor's data for a host buffer; from_device()
 * copies a result back after synchronising the device. */
#ifndef ROPEGEN_TESTS_AOT_DEVICE_MEMORY_H
#define ROPEGEN_TESTS_AOT_DEVICE_MEMORY_H

#include <dlfcn.h>

static ropegen_device call_device = {ROPEGEN_DEVICE_CPU, 0};

static struct {
  int present;
  int (*init)(unsigned);
  int (*device_get)(int *, int);
  int (*primary_ctx_retain)(void **, int);
  int (*ctx_set_current)(void *);
  int (*mem_alloc)(unsigned long long *, size_t);
  int (*memcpy_htod)(unsigned long long, const void *, size_t);
  int (*memcpy_dtoh)(void *, unsigned long long, size_t);
  int (*ctx_synchronize)(void);
} cu;

static void cuda_check(int result, const char *what) {
  if (result != 0) {
    fprintf(stderr, "%s failed: CUresult %d\n", what, result);
    exit(110);
  }
}

/* Whether this machine runs CUDA: a driver and device call_device.device_id. */
static int cuda_open(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int device;
  void *context;
  if (!lib) return 0;
  *(void **)&cu.init = dlsym(lib, "cuInit");
  *(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
  *(void **)&cu.primary_ctx_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&cu.ctx_set_current = dlsym(lib, "cuCtxSetCurrent");
  *(void **)&cu.mem_alloc = dlsym(lib, "cuMemAlloc_v2");
  *(void **)&cu.memcpy_htod = dlsym(lib, "cuMemcpyHtoD_v2");
  *(void **)&cu.memcpy_dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
  *(void **)&cu.ctx_synchronize = dlsym(lib, "cuCtxSynchronize");
  if (!cu.init || cu.init(0) != 0 || cu.device_get(&device, call_device.device_id) != 0) return 0;
  cuda_check(cu.primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
  cuda_check(cu.ctx_set_current(context), "cuCtxSetCurrent");
  return 1;
}

static void use_device(int device_type, int device_id) {
  call_device.device_type = device_type;
  call_device.device_id = device_id;
  if (device_type == ROPEGEN_DEVICE_CUDA) cu.present = cuda_open();
}

#ifdef ROPE_VULKAN_MEMORY
#define ROPE_PASTE2(a, b) a##b
#define ROPE_PASTE(a, b) ROPE_PASTE2(a, b)

static void vulkan_check(int status, const ropegen_message *message, const char *what) {
  if (status != ROPEGEN_OK) {
    fprintf(stderr, "%s failed (%d): %s\n", what, status, message->text);
    exit(111);
  }
}

/* ROPE_DRIVER_VULKAN_OFFSET=n: each tensor starts n bytes into its
 * allocation (a view, as a fused qkv slice is). */
static void *vulkan_to_device(void *host, size_t bytes) {
  void *data;
  ropegen_message message;
  const size_t offset = getenv("ROPE_DRIVER_VULKAN_OFFSET") ? (size_t)atol(getenv("ROPE_DRIVER_VULKAN_OFFSET")) : 0;
  vulkan_check(ROPE_PASTE(ROPE_NAME, _device_alloc)(offset + (bytes ? bytes : 1), &data, &message), &message,
               "device_alloc");
  data = (char *)data + offset;
  vulkan_check(ROPE_PASTE(ROPE_NAME, _copy_to_device)(data, host, bytes, &message), &message, "copy_to_device");
  return data;
}

static void vulkan_from_device(void *host, void *data, size_t bytes) {
  ropegen_message message;
  vulkan_check(ROPE_PASTE(ROPE_NAME, _copy_to_host)(host, data, bytes, &message), &message, "copy_to_host");
}
#endif

static void *to_device(void *host, size_t bytes) {
  unsigned long long data;
#ifdef ROPE_VULKAN_MEMORY
  if (call_device.device_type == ROPEGEN_DEVICE_VULKAN) return vulkan_to_device(host, bytes);
#endif
  if (call_device.device_type != ROPEGEN_DEVICE_CUDA || !cu.present) return host;
  cuda_check(cu.mem_alloc(&data, bytes ? bytes : 1), "cuMemAlloc");
  cuda_check(cu.memcpy_htod(data, host, bytes), "cuMemcpyHtoD");
  return (void *)(uintptr_t)data;
}

static void from_device(void *host, void *data, size_t bytes) {
#ifdef ROPE_VULKAN_MEMORY
  if (call_device.device_type == ROPEGEN_DEVICE_VULKAN) {
    vulkan_from_device(host, data, bytes);
    return;
  }
#endif
  if (call_device.device_type != ROPEGEN_DEVICE_CUDA || !cu.present) return;
  cuda_check(cu.ctx_synchronize(), "cuCtxSynchronize");
  cuda_check(cu.memcpy_dtoh(host, (unsigned long long)(uintptr_t)data, bytes), "cuMemcpyDtoH");
}

#endif
