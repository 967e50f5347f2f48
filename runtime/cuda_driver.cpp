#include "runtime/cuda_driver.h"

#include <dlfcn.h>

namespace ropegen::runtime {
namespace {

std::variant<CudaDriver, std::string> load() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::string("the CUDA driver library libcuda.so.1 cannot be loaded (no NVIDIA driver installed)");
  CudaDriver d;
  auto symbol = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name)); };
  symbol(d.init, "cuInit");
  symbol(d.device_count, "cuDeviceGetCount");
  symbol(d.device_get, "cuDeviceGet");
  symbol(d.attribute, "cuDeviceGetAttribute");
  symbol(d.name, "cuDeviceGetName");
  symbol(d.primary_context_retain, "cuDevicePrimaryCtxRetain");
  if (!d.init || !d.device_count || !d.device_get || !d.attribute || !d.name || !d.primary_context_retain)
    return std::string("libcuda.so.1 lacks the CUDA driver API (cuInit, cuDevicePrimaryCtxRetain, ...)");
  return d;  // the library stays loaded for the process
}

}  // namespace

const std::variant<CudaDriver, std::string>& cuda_driver() {
  static const std::variant<CudaDriver, std::string> driver = load();
  return driver;
}

}  // namespace ropegen::runtime
