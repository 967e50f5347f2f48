#include "runtime/cuda_driver.h"

namespace ropegen::runtime {
namespace {

// The entry points the probe and the primary contexts use.
constexpr unsigned long long kNeeds = ROPEGEN_CUDA_NEEDS(cuInit) | ROPEGEN_CUDA_NEEDS(cuDeviceGetCount) |
                                      ROPEGEN_CUDA_NEEDS(cuDeviceGet) | ROPEGEN_CUDA_NEEDS(cuDeviceGetAttribute) |
                                      ROPEGEN_CUDA_NEEDS(cuDeviceGetName) |
                                      ROPEGEN_CUDA_NEEDS(cuDevicePrimaryCtxRetain);

std::variant<CudaDriver, std::string> load() {
  CudaDriver d;
  if (ropegen_cuda_driver_load(&d, kNeeds, ROPEGEN_CUDA_DRIVER_OR_LIBCUDA_SO)) return d;
  if (!d.library)
    return std::string("the CUDA driver library libcuda.so.1 cannot be loaded (no NVIDIA driver installed)");
  return std::string("libcuda.so.1 lacks the CUDA driver API (cuInit, cuDevicePrimaryCtxRetain, ...)");
}

}  // namespace

const std::variant<CudaDriver, std::string>& cuda_driver() {
  static const std::variant<CudaDriver, std::string> driver = load();
  return driver;
}

}  // namespace ropegen::runtime
