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

/* The repository's header, found beside this file, as the compile line
 * gives only the library's directory. */
#include "../../base/cuda_driver_api.h"

static ropegen_device call_device = {ROPEGEN_DEVICE_CPU, 0};

static ropegen_cuda_driver cu;
static int cu_present;

static void cuda_check(int result, const char *what) {
  if (result != 0) {
    fprintf(stderr, "%s failed: CUresult %d\n", what, result);
    exit(110);
  }
}

/* Whether this machine runs CUDA: a driver and device call_device.device_id. */
static int cuda_open(void) {
  const unsigned long long needs =
      ROPEGEN_CUDA_NEEDS(cuInit) | ROPEGEN_CUDA_NEEDS(cuDeviceGet) | ROPEGEN_CUDA_NEEDS(cuDevicePrimaryCtxRetain) |
      ROPEGEN_CUDA_NEEDS(cuCtxSetCurrent) | ROPEGEN_CUDA_NEEDS(cuMemAlloc_v2) | ROPEGEN_CUDA_NEEDS(cuMemcpyHtoD_v2) |
      ROPEGEN_CUDA_NEEDS(cuMemcpyDtoH_v2) | ROPEGEN_CUDA_NEEDS(cuCtxSynchronize);
  ropegen_CUdevice device;
  ropegen_CUcontext context;
  if (!ropegen_cuda_driver_load(&cu, needs, 0) || cu.cuInit(0) != 0 ||
      cu.cuDeviceGet(&device, call_device.device_id) != 0)
    return 0;
  cuda_check(cu.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  cuda_check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  return 1;
}

static void use_device(int device_type, int device_id) {
  call_device.device_type = device_type;
  call_device.device_id = device_id;
  if (device_type == ROPEGEN_DEVICE_CUDA) cu_present = cuda_open();
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
  ropegen_CUdeviceptr data;
#ifdef ROPE_VULKAN_MEMORY
  if (call_device.device_type == ROPEGEN_DEVICE_VULKAN) return vulkan_to_device(host, bytes);
#endif
  if (call_device.device_type != ROPEGEN_DEVICE_CUDA || !cu_present) return host;
  cuda_check(cu.cuMemAlloc_v2(&data, bytes ? bytes : 1), "cuMemAlloc");
  cuda_check(cu.cuMemcpyHtoD_v2(data, host, bytes), "cuMemcpyHtoD");
  return (void *)(uintptr_t)data;
}

static void from_device(void *host, void *data, size_t bytes) {
#ifdef ROPE_VULKAN_MEMORY
  if (call_device.device_type == ROPEGEN_DEVICE_VULKAN) {
    vulkan_from_device(host, data, bytes);
    return;
  }
#endif
  if (call_device.device_type != ROPEGEN_DEVICE_CUDA || !cu_present) return;
  cuda_check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
  cuda_check(cu.cuMemcpyDtoH_v2(host, (ropegen_CUdeviceptr)(uintptr_t)data, bytes), "cuMemcpyDtoH");
}

#endif
