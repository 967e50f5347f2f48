#include "runtime/cuda_context.h"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "runtime/cuda_driver.h"
#include "runtime/device_call.h"

namespace ropegen::runtime {
namespace {

int32_t acquire_context(Halide::JITUserContext* c, void** context, bool /*create*/) {
  *context = static_cast<CudaCallContext*>(c)->context();
  return 0;
}

int32_t release_context(Halide::JITUserContext*) { return 0; }  // retained for the process

int32_t get_stream(Halide::JITUserContext* c, void* /*context*/, void** stream) {
  *stream = static_cast<CudaCallContext*>(c)->stream();
  return 0;
}

// Halide's default (posix_get_symbol.cpp), and libcuda.so.1 for libcuda.so.
void* load_library(const char* name) {
  void* lib = dlopen(name, RTLD_LAZY);
  if (!lib && std::strcmp(name, ROPEGEN_CUDA_DRIVER_DEVELOPMENT_LIBRARY) == 0)
    lib = dlopen(ROPEGEN_CUDA_DRIVER_LIBRARY, RTLD_LAZY);
  return lib;
}

}  // namespace

void* primary_context(int ordinal) {
  static std::mutex mutex;
  static std::map<int, void*> retained;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = retained.find(ordinal); it != retained.end()) return it->second;
  const auto& loaded = cuda_driver();
  if (const auto* why = std::get_if<std::string>(&loaded)) throw DeviceError(*why);
  const CudaDriver& cu = std::get<CudaDriver>(loaded);
  ropegen_CUdevice device = 0;
  ropegen_CUcontext context = nullptr;
  if (const int e = cu.cuInit(0); e != 0) throw DeviceError(fmt::format("cuInit failed (CUresult {})", e));
  if (const int e = cu.cuDeviceGet(&device, ordinal); e != 0)
    throw DeviceError(fmt::format("cuda:{} is not a CUDA device of this process (CUresult {})", ordinal, e));
  if (const int e = cu.cuDevicePrimaryCtxRetain(&context, device); e != 0)
    throw DeviceError(fmt::format("the primary context of cuda:{} cannot be retained (CUresult {})", ordinal, e));
  retained.emplace(ordinal, context);
  return context;
}

CudaCallContext::CudaCallContext(void* context, void* stream) : context_(context), stream_(stream) {
  handlers.custom_cuda_acquire_context = acquire_context;
  handlers.custom_cuda_release_context = release_context;
  handlers.custom_cuda_get_stream = get_stream;
}

void find_libcuda_so_1() {
  static std::once_flag once;
  std::call_once(once, [] {
    using Halide::Internal::JITSharedRuntime;
    Halide::JITHandlers defaults = JITSharedRuntime::set_default_handlers({});  // read them
    if (!defaults.custom_load_library) defaults.custom_load_library = load_library;
    JITSharedRuntime::set_default_handlers(defaults);
  });
}

}  // namespace ropegen::runtime
