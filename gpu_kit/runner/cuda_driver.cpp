#include "cuda_driver.h"

#include <string>

namespace kit {
namespace {

// Every entry point the runner calls.
constexpr unsigned long long kNeeds =
    ROPEGEN_CUDA_NEEDS(cuInit) | ROPEGEN_CUDA_NEEDS(cuDriverGetVersion) | ROPEGEN_CUDA_NEEDS(cuGetErrorString) |
    ROPEGEN_CUDA_NEEDS(cuDeviceGet) | ROPEGEN_CUDA_NEEDS(cuDeviceGetName) |
    ROPEGEN_CUDA_NEEDS(cuDeviceGetAttribute) | ROPEGEN_CUDA_NEEDS(cuDevicePrimaryCtxRetain) |
    ROPEGEN_CUDA_NEEDS(cuCtxSetCurrent) | ROPEGEN_CUDA_NEEDS(cuMemAlloc_v2) | ROPEGEN_CUDA_NEEDS(cuMemFree_v2) |
    ROPEGEN_CUDA_NEEDS(cuMemcpyHtoD_v2) | ROPEGEN_CUDA_NEEDS(cuMemcpyDtoH_v2) |
    ROPEGEN_CUDA_NEEDS(cuMemcpyDtoDAsync_v2) | ROPEGEN_CUDA_NEEDS(cuMemsetD8_v2) |
    ROPEGEN_CUDA_NEEDS(cuMemsetD32Async) | ROPEGEN_CUDA_NEEDS(cuStreamCreate) |
    ROPEGEN_CUDA_NEEDS(cuStreamSynchronize) | ROPEGEN_CUDA_NEEDS(cuStreamBeginCapture_v2) |
    ROPEGEN_CUDA_NEEDS(cuStreamEndCapture) | ROPEGEN_CUDA_NEEDS(cuGraphInstantiateWithFlags) |
    ROPEGEN_CUDA_NEEDS(cuGraphLaunch) | ROPEGEN_CUDA_NEEDS(cuEventCreate) | ROPEGEN_CUDA_NEEDS(cuEventRecord) |
    ROPEGEN_CUDA_NEEDS(cuEventSynchronize) | ROPEGEN_CUDA_NEEDS(cuEventElapsedTime);

std::string load_into(CudaDriver& d) {
  if (!ropegen_cuda_driver_load(&d, kNeeds, 0)) {
    if (!d.library) return "the CUDA driver library libcuda.so.1 cannot be loaded (no NVIDIA driver here)";
    return "libcuda.so.1 lacks part of the CUDA driver API the kit uses: " + std::string(d.missing);
  }
  if (const CUresult r = d.cuInit(0); r != 0)
    return "the CUDA driver failed to initialise (CUresult " + std::to_string(r) + "; is a GPU visible here?)";
  if (d.cuDeviceGet(&d.device, 0) != 0) return "the CUDA driver reports no device";
  CUcontext context = nullptr;
  if (d.cuDevicePrimaryCtxRetain(&context, d.device) != 0 || d.cuCtxSetCurrent(context) != 0)
    return "device 0's primary context cannot be made current";
  char name[256] = {};
  int sms = 0, major = 0, minor = 0, version = 0;
  d.cuDeviceGetName(name, sizeof name - 1, d.device);
  d.cuDeviceGetAttribute(&sms, ROPEGEN_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.device);
  d.cuDeviceGetAttribute(&major, ROPEGEN_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d.device);
  d.cuDeviceGetAttribute(&minor, ROPEGEN_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d.device);
  d.cuDriverGetVersion(&version);
  d.description = std::string(name) + " (sm_" + std::to_string(major) + std::to_string(minor) + ", " +
                  std::to_string(sms) + " SMs, driver API " + std::to_string(version / 1000) + "." +
                  std::to_string(version % 1000 / 10) + ")";
  return "";
}

}  // namespace

const CudaDriver* CudaDriver::load(std::string& why_not) {
  static CudaDriver driver;
  static const std::string failure = load_into(driver);
  why_not = failure;
  return failure.empty() ? &driver : nullptr;
}

void CudaDriver::check(CUresult r, const char* what) const {
  if (r == 0) return;
  const char* text = nullptr;
  cuGetErrorString(r, &text);
  throw CudaError(std::string(what) + " failed: " + (text ? text : "CUresult " + std::to_string(r)));
}

}  // namespace kit
