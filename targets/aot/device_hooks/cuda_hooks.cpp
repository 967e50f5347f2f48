// The CUDA side of an AOT library with a CUDA target (linked into its
// archive only then; no Halide, no CUDA toolkit: the driver is dlopened).
//
// Strong definitions of the weak hooks of Halide 21's CUDA runtime (the
// one in the same archive; in a shared object built from the archive with
// only <name>_run exported they stay private to it):
//  - halide_cuda_get_symbol: the driver is libcuda.so.1, the name every
//    NVIDIA driver installs (Halide 21 dlopens "libcuda.so", which only the
//    CUDA toolkit's development package provides).
//  - halide_cuda_acquire_context / _release_context: kernels run in the
//    primary context of the call's device (what the CUDA runtime and
//    PyTorch use), retained once per device and kept for the process's
//    life, instead of a context of Halide's own.
//  - halide_cuda_get_stream: the call's stream (ropegen_call.stream; NULL:
//    the legacy default stream).
// The call's device and stream come as the entry's user_context
// (call/device_context.h). After the first call on a device (the driver
// loaded, the primary context retained, Halide's module of PTX loaded and
// JIT-compiled for the GPU by the driver) a call allocates nothing, copies
// nothing and synchronises nothing here: acquire is an atomic load.
//
// ropegen_cuda_api (ropegen_c.h's ropegen_device_api) is what the
// generated header points the library at; naming it is what pulls this
// object out of the archive, so the strong definitions win over the
// runtime's weak ones.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "base/cuda_driver_api.h"
#include "call/device_context.h"
#include "ropegen/ropegen_aot.h"

namespace {

using CUresult = ropegen_CUresult;
using CUcontext = ropegen_CUcontext;
constexpr CUresult kSuccess = ROPEGEN_CUDA_SUCCESS;
constexpr int kMaxDevices = 64;

// The driver: cuGetErrorName is only used to name a failure, when present.
struct Driver {
  ropegen_cuda_driver api;
  const char* why = nullptr;  // what is missing; nullptr: loaded
  CUresult init_result = ROPEGEN_CUDA_ERROR_NOT_FOUND;
};

constexpr unsigned long long kNeeds = ROPEGEN_CUDA_NEEDS(cuInit) | ROPEGEN_CUDA_NEEDS(cuDeviceGetCount) |
                                      ROPEGEN_CUDA_NEEDS(cuDeviceGet) |
                                      ROPEGEN_CUDA_NEEDS(cuDevicePrimaryCtxRetain);

Driver load_driver() {
  Driver d;
  if (!ropegen_cuda_driver_load(&d.api, kNeeds, ROPEGEN_CUDA_DRIVER_OR_LIBCUDA_SO)) {
    d.why = d.api.library ? "libcuda.so.1 lacks the CUDA driver API (cuInit, cuDevicePrimaryCtxRetain)"
                          : "the CUDA driver library libcuda.so.1 cannot be loaded (no NVIDIA driver on this machine)";
    return d;
  }
  d.init_result = d.api.cuInit(0);
  if (d.init_result != kSuccess) d.why = "the CUDA driver failed to initialise (cuInit)";
  return d;
}

// Loaded on first use, once per process (a thread-safe static).
const Driver& driver() {
  static const Driver d = load_driver();
  return d;
}

// Each device's primary context once retained (never released: the
// library may run until the process exits, and Halide keeps modules
// loaded in it).
std::atomic<CUcontext> primary_contexts[kMaxDevices];
std::mutex retain_lock;

CUresult primary_context(int device_id, CUcontext* out) {
  if (device_id < 0 || device_id >= kMaxDevices) return ROPEGEN_CUDA_ERROR_INVALID_DEVICE;
  if ((*out = primary_contexts[device_id].load(std::memory_order_acquire))) return kSuccess;
  const Driver& d = driver();
  if (d.why) return d.init_result != kSuccess && d.api.cuInit ? d.init_result : ROPEGEN_CUDA_ERROR_NOT_FOUND;
  std::lock_guard<std::mutex> lock(retain_lock);
  if ((*out = primary_contexts[device_id].load(std::memory_order_acquire))) return kSuccess;
  ropegen_CUdevice device = 0;
  CUcontext context = nullptr;
  if (CUresult e = d.api.cuDeviceGet(&device, device_id); e != kSuccess) return e;
  if (CUresult e = d.api.cuDevicePrimaryCtxRetain(&context, device); e != kSuccess) return e;
  primary_contexts[device_id].store(context, std::memory_order_release);
  *out = context;
  return kSuccess;
}

int device_of(void* user_context) {
  const ropegen::call::DeviceContext* c = ropegen::call::device_context(user_context);
  return c ? c->device_id : 0;
}

const char* error_name(CUresult e) {
  const char* name = nullptr;
  if (driver().api.cuGetErrorName && driver().api.cuGetErrorName(e, &name) == kSuccess && name) return name;
  return "an unknown CUresult";
}

int ready(int32_t device_id, ropegen_message* message) {
  auto fail = [&](int status, const char* format, auto... args) {
    if (message) std::snprintf(message->text, sizeof message->text, format, args...);
    return status;
  };
  const Driver& d = driver();
  if (d.why && d.init_result != kSuccess && d.api.cuInit)
    return fail(ROPEGEN_ERROR_UNSUPPORTED, "cuda:%d: %s: %s (%d)", device_id, d.why, error_name(d.init_result),
                d.init_result);
  if (d.why) return fail(ROPEGEN_ERROR_UNSUPPORTED, "cuda:%d: %s", device_id, d.why);
  int count = 0;
  if (d.api.cuDeviceGetCount(&count) != kSuccess) count = 0;
  if (device_id < 0 || device_id >= count || device_id >= kMaxDevices)
    return fail(ROPEGEN_ERROR_INVALID_ARGUMENT, "cuda:%d: no such device: this process sees %d CUDA device%s",
                device_id, count, count == 1 ? "" : "s");
  CUcontext context = nullptr;
  if (const CUresult e = primary_context(device_id, &context); e != kSuccess)
    return fail(ROPEGEN_ERROR_KERNEL, "cuda:%d: cuDevicePrimaryCtxRetain failed: %s (%d)", device_id, error_name(e), e);
  return ROPEGEN_OK;
}

}  // namespace

extern "C" {

const struct halide_device_interface_t* halide_cuda_device_interface();

void* halide_cuda_get_symbol(void* user_context, const char* name) {
  const Driver& d = driver();
  return d.api.library ? dlsym(d.api.library, name) : nullptr;
}

int halide_cuda_acquire_context(void* user_context, CUcontext* ctx, bool create) {
  const int device_id = device_of(user_context);
  if (!create) {
    *ctx = device_id >= 0 && device_id < kMaxDevices ? primary_contexts[device_id].load(std::memory_order_acquire)
                                                      : nullptr;
    return kSuccess;
  }
  return primary_context(device_id, ctx);
}

int halide_cuda_release_context(void* user_context) { return kSuccess; }

int halide_cuda_get_stream(void* user_context, CUcontext ctx, void** stream) {
  const ropegen::call::DeviceContext* c = ropegen::call::device_context(user_context);
  *stream = c ? c->stream : nullptr;
  return kSuccess;
}

extern const ropegen_device_api ropegen_cuda_api;
// CUDA tensors are the caller's own memory: no allocation or view binding.
const ropegen_device_api ropegen_cuda_api = {ROPEGEN_DEVICE_CUDA, halide_cuda_device_interface, ready, nullptr, nullptr,
                                             nullptr, nullptr, nullptr};

}  // extern "C"
