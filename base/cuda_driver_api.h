/* The CUDA driver API entry points rope-gen calls, in one table, and a loader
 * for them: libcuda.so.1 (what every NVIDIA driver installs) by dlopen with
 * RTLD_NOW | RTLD_LOCAL, so nothing links against the driver and nothing is
 * added to the process's global symbols. Header-only C99 and C++ (libc and
 * libdl, no CUDA toolkit): the runtime, the AOT libraries' hooks, the GPU
 * kit's runner and the C test drivers include it alike.
 *
 * Each row is the symbol the driver exports (the _v2 name where the current
 * ABI has one: cuMemAlloc_v2 takes a 64-bit CUdeviceptr), its result and its
 * documented C signature; enums are passed as int. A user states which
 * entries it needs (ROPEGEN_CUDA_NEEDS) and keeps its own policy: messages,
 * whether the handle is cached for the process. The library stays loaded:
 * the driver is never dlclosed. */
#ifndef ROPEGEN_BASE_CUDA_DRIVER_API_H
#define ROPEGEN_BASE_CUDA_DRIVER_API_H

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

/* cuda.h's types by ABI, under names of ours so that a translation unit may
 * include cuda.h as well; the handles are cuda.h's opaque struct pointers. */
typedef int ropegen_CUresult;
typedef int ropegen_CUdevice;
typedef unsigned long long ropegen_CUdeviceptr;
typedef struct CUctx_st *ropegen_CUcontext;
typedef struct CUstream_st *ropegen_CUstream;
typedef struct CUevent_st *ropegen_CUevent;
typedef struct CUgraph_st *ropegen_CUgraph;
typedef struct CUgraphExec_st *ropegen_CUgraphExec;

/* The CUresult and enum values rope-gen reads or passes (cuda.h's). */
/* The driver's library name, and the name only the CUDA toolkit's
 * development package provides (which Halide 21's runtime asks for). */
#define ROPEGEN_CUDA_DRIVER_LIBRARY "libcuda.so.1"
#define ROPEGEN_CUDA_DRIVER_DEVELOPMENT_LIBRARY "libcuda.so"

#define ROPEGEN_CUDA_SUCCESS 0
#define ROPEGEN_CUDA_ERROR_INVALID_DEVICE 101
#define ROPEGEN_CUDA_ERROR_NOT_FOUND 500
#define ROPEGEN_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define ROPEGEN_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define ROPEGEN_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define ROPEGEN_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1

#define ROPEGEN_CUDA_DRIVER_ENTRY_POINTS(X)                                                            \
  X(cuInit, ropegen_CUresult, (unsigned int flags))                                                    \
  X(cuDriverGetVersion, ropegen_CUresult, (int *version))                                              \
  X(cuGetErrorName, ropegen_CUresult, (ropegen_CUresult error, const char **name))                     \
  X(cuGetErrorString, ropegen_CUresult, (ropegen_CUresult error, const char **text))                   \
  X(cuDeviceGetCount, ropegen_CUresult, (int *count))                                                  \
  X(cuDeviceGet, ropegen_CUresult, (ropegen_CUdevice *device, int ordinal))                            \
  X(cuDeviceGetName, ropegen_CUresult, (char *name, int length, ropegen_CUdevice device))              \
  X(cuDeviceGetAttribute, ropegen_CUresult, (int *value, int attribute, ropegen_CUdevice device))      \
  X(cuDevicePrimaryCtxRetain, ropegen_CUresult, (ropegen_CUcontext *context, ropegen_CUdevice device)) \
  X(cuCtxSetCurrent, ropegen_CUresult, (ropegen_CUcontext context))                                    \
  X(cuCtxPushCurrent_v2, ropegen_CUresult, (ropegen_CUcontext context))                                \
  X(cuCtxPopCurrent_v2, ropegen_CUresult, (ropegen_CUcontext *context))                                \
  X(cuCtxSynchronize, ropegen_CUresult, (void))                                                        \
  X(cuMemAlloc_v2, ropegen_CUresult, (ropegen_CUdeviceptr *pointer, size_t bytes))                     \
  X(cuMemFree_v2, ropegen_CUresult, (ropegen_CUdeviceptr pointer))                                     \
  X(cuMemcpyHtoD_v2, ropegen_CUresult, (ropegen_CUdeviceptr to, const void *from, size_t bytes))       \
  X(cuMemcpyDtoH_v2, ropegen_CUresult, (void *to, ropegen_CUdeviceptr from, size_t bytes))             \
  X(cuMemcpyDtoDAsync_v2, ropegen_CUresult,                                                            \
    (ropegen_CUdeviceptr to, ropegen_CUdeviceptr from, size_t bytes, ropegen_CUstream stream))         \
  X(cuMemsetD8_v2, ropegen_CUresult, (ropegen_CUdeviceptr to, unsigned char value, size_t count))      \
  X(cuMemsetD32Async, ropegen_CUresult,                                                                \
    (ropegen_CUdeviceptr to, unsigned int value, size_t count, ropegen_CUstream stream))               \
  X(cuStreamCreate, ropegen_CUresult, (ropegen_CUstream *stream, unsigned int flags))                  \
  X(cuStreamSynchronize, ropegen_CUresult, (ropegen_CUstream stream))                                  \
  X(cuStreamBeginCapture_v2, ropegen_CUresult, (ropegen_CUstream stream, int mode))                    \
  X(cuStreamEndCapture, ropegen_CUresult, (ropegen_CUstream stream, ropegen_CUgraph *graph))           \
  X(cuGraphInstantiateWithFlags, ropegen_CUresult,                                                     \
    (ropegen_CUgraphExec *exec, ropegen_CUgraph graph, unsigned long long flags))                      \
  X(cuGraphLaunch, ropegen_CUresult, (ropegen_CUgraphExec exec, ropegen_CUstream stream))              \
  X(cuEventCreate, ropegen_CUresult, (ropegen_CUevent *event, unsigned int flags))                     \
  X(cuEventRecord, ropegen_CUresult, (ropegen_CUevent event, ropegen_CUstream stream))                 \
  X(cuEventSynchronize, ropegen_CUresult, (ropegen_CUevent event))                                     \
  X(cuEventElapsedTime, ropegen_CUresult, (float *milliseconds, ropegen_CUevent start, ropegen_CUevent end))

/* The driver: its library handle and one pointer per entry point, named as
 * the symbol (d.cuMemAlloc_v2(&p, n)). */
typedef struct ropegen_cuda_driver {
  void *library;       /* NULL: the library cannot be loaded */
  const char *missing; /* the first needed entry point the library lacks, or NULL */
#define ROPEGEN_CUDA_DRIVER_MEMBER_(name, result, params) result(*name) params;
  ROPEGEN_CUDA_DRIVER_ENTRY_POINTS(ROPEGEN_CUDA_DRIVER_MEMBER_)
#undef ROPEGEN_CUDA_DRIVER_MEMBER_
} ropegen_cuda_driver;

/* A row's position, for ROPEGEN_CUDA_NEEDS. */
enum ropegen_cuda_driver_row {
#define ROPEGEN_CUDA_DRIVER_ROW_(name, result, params) ropegen_cuda_driver_row_##name,
  ROPEGEN_CUDA_DRIVER_ENTRY_POINTS(ROPEGEN_CUDA_DRIVER_ROW_)
#undef ROPEGEN_CUDA_DRIVER_ROW_
  ropegen_cuda_driver_rows
};
typedef char ropegen_cuda_driver_rows_fit_a_mask[ropegen_cuda_driver_rows <= 64 ? 1 : -1];

/* The set of entry points a user needs: ROPEGEN_CUDA_NEEDS(cuInit) |
 * ROPEGEN_CUDA_NEEDS(cuMemAlloc_v2) | ... (a name not in the table does not
 * compile). */
#define ROPEGEN_CUDA_NEEDS(name) (1ull << ropegen_cuda_driver_row_##name)

/* Options of ropegen_cuda_driver_load. */
#define ROPEGEN_CUDA_DRIVER_OR_LIBCUDA_SO 1 /* then libcuda.so (the toolkit's development name) */

/* Loads the driver into *d: every entry point the library has (the others
 * NULL). Returns 1 when the library is loaded and has every entry of
 * `needs`; else 0, with d->library NULL (no library) or d->missing naming
 * the first needed entry it lacks. */
static inline int ropegen_cuda_driver_load(ropegen_cuda_driver *d, unsigned long long needs, int options) {
  d->missing = NULL;
  d->library = dlopen(ROPEGEN_CUDA_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!d->library && (options & ROPEGEN_CUDA_DRIVER_OR_LIBCUDA_SO))
    d->library = dlopen(ROPEGEN_CUDA_DRIVER_DEVELOPMENT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  /* memcpy: POSIX's way from dlsym's void * to a function pointer, in C and C++ alike. */
#define ROPEGEN_CUDA_DRIVER_BIND_(name, result, params)                                                \
  {                                                                                                    \
    void *entry = d->library ? dlsym(d->library, #name) : NULL;                                        \
    memcpy(&d->name, &entry, sizeof entry);                                                            \
    if (d->library && !entry && !d->missing && (needs & ROPEGEN_CUDA_NEEDS(name))) d->missing = #name; \
  }
  ROPEGEN_CUDA_DRIVER_ENTRY_POINTS(ROPEGEN_CUDA_DRIVER_BIND_)
#undef ROPEGEN_CUDA_DRIVER_BIND_
  return d->library && !d->missing;
}

#endif
