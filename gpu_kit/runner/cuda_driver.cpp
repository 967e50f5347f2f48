#include "cuda_driver.h"

#include <dlfcn.h>

#include <string>

namespace kit {
namespace {

template <typename F>
bool bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

std::string load_into(CudaDriver& d) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "the CUDA driver library libcuda.so.1 cannot be loaded (no NVIDIA driver here)";
  // The _v2 names are the current ABI of the calls that have one.
  const bool all = bind(lib, d.cuInit, "cuInit") && bind(lib, d.cuDeviceGet, "cuDeviceGet") &&
                   bind(lib, d.cuDeviceGetName, "cuDeviceGetName") &&
                   bind(lib, d.cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
                   bind(lib, d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
                   bind(lib, d.cuCtxSetCurrent, "cuCtxSetCurrent") && bind(lib, d.cuMemAlloc, "cuMemAlloc_v2") &&
                   bind(lib, d.cuMemFree, "cuMemFree_v2") && bind(lib, d.cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
                   bind(lib, d.cuMemcpyDtoH, "cuMemcpyDtoH_v2") &&
                   bind(lib, d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2") && bind(lib, d.cuMemsetD8, "cuMemsetD8_v2") &&
                   bind(lib, d.cuMemsetD32Async, "cuMemsetD32Async") && bind(lib, d.cuStreamCreate, "cuStreamCreate") &&
                   bind(lib, d.cuStreamSynchronize, "cuStreamSynchronize") &&
                   bind(lib, d.cuEventCreate, "cuEventCreate") && bind(lib, d.cuEventRecord, "cuEventRecord") &&
                   bind(lib, d.cuEventSynchronize, "cuEventSynchronize") &&
                   bind(lib, d.cuEventElapsedTime, "cuEventElapsedTime") &&
                   bind(lib, d.cuStreamBeginCapture, "cuStreamBeginCapture_v2") &&
                   bind(lib, d.cuStreamEndCapture, "cuStreamEndCapture") &&
                   bind(lib, d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags") &&
                   bind(lib, d.cuGraphLaunch, "cuGraphLaunch") && bind(lib, d.cuGetErrorString, "cuGetErrorString") &&
                   bind(lib, d.cuDriverGetVersion, "cuDriverGetVersion");
  if (!all) return "libcuda.so.1 lacks part of the CUDA driver API the kit uses: " + std::string(dlerror() ? dlerror() : "");
  if (const CUresult r = d.cuInit(0); r != 0)
    return "the CUDA driver failed to initialise (CUresult " + std::to_string(r) + "; is a GPU visible here?)";
  if (d.cuDeviceGet(&d.device, 0) != 0) return "the CUDA driver reports no device";
  CUcontext context = nullptr;
  if (d.cuDevicePrimaryCtxRetain(&context, d.device) != 0 || d.cuCtxSetCurrent(context) != 0)
    return "device 0's primary context cannot be made current";
  char name[256] = {};
  int sms = 0, major = 0, minor = 0, version = 0;
  d.cuDeviceGetName(name, sizeof name - 1, d.device);
  d.cuDeviceGetAttribute(&sms, kAttributeMultiprocessors, d.device);
  d.cuDeviceGetAttribute(&major, kAttributeCapabilityMajor, d.device);
  d.cuDeviceGetAttribute(&minor, kAttributeCapabilityMinor, d.device);
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
