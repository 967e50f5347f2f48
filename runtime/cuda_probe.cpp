// CUDA through the driver API alone (libcuda.so.1, no toolkit needed).
#include <algorithm>
#include <fmt/format.h>

#include "runtime/cuda_driver.h"
#include "runtime/gpu_probes.h"

namespace ropegen::runtime {
namespace {

// The highest capability Halide 21 can target that the device runs.
Halide::Target::Feature capability_feature(int version) {
  using T = Halide::Target;
  const std::pair<int, T::Feature> levels[] = {{86, T::CUDACapability86}, {80, T::CUDACapability80},
                                               {75, T::CUDACapability75}, {70, T::CUDACapability70},
                                               {61, T::CUDACapability61}, {50, T::CUDACapability50},
                                               {35, T::CUDACapability35}, {32, T::CUDACapability32},
                                               {30, T::CUDACapability30}};
  for (auto [level, feature] : levels)
    if (version >= level) return feature;
  return T::FeatureEnd;
}

}  // namespace

ProbeResult probe_cuda() {
  const auto& loaded = cuda_driver();
  if (const auto* why = std::get_if<std::string>(&loaded)) return *why;
  const CudaDriver& cu = std::get<CudaDriver>(loaded);
  if (const int e = cu.cuInit(0); e != 0)
    return fmt::format("the CUDA driver failed to initialise (CUresult {}; is a GPU visible to this process?)", e);
  int count = 0;
  if (cu.cuDeviceGetCount(&count) != 0 || count == 0) return std::string("the CUDA driver reports no CUDA device");
  // Halide picks one of the devices at run time: the oldest capability
  // among them is safe for every pick.
  int lowest = 1000;
  std::string names;
  for (int i = 0; i < count; ++i) {
    ropegen_CUdevice dev = 0;
    int major = 0, minor = 0;
    char name[256] = {};
    if (cu.cuDeviceGet(&dev, i) != 0 ||
        cu.cuDeviceGetAttribute(&major, ROPEGEN_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != 0 ||
        cu.cuDeviceGetAttribute(&minor, ROPEGEN_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != 0)
      continue;
    cu.cuDeviceGetName(name, sizeof(name) - 1, dev);
    lowest = std::min(lowest, major * 10 + minor);
    names += fmt::format("{}{} (sm_{}{})", names.empty() ? "" : ", ", name, major, minor);
  }
  if (lowest == 1000) return std::string("the CUDA driver cannot describe its devices");
  DeviceInfo info;
  info.description = "CUDA device " + names;
  info.version_feature = capability_feature(lowest);
  return info;
}

}  // namespace ropegen::runtime
