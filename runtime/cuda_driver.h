// The CUDA driver API as rope-gen calls it itself: libcuda.so.1 (what the
// driver installs; libcuda.so is only in development packages) by dlopen
// with RTLD_LOCAL, once per process: rope-gen never links against the driver
// and adds nothing to the process's global symbols. Only the entry points
// rope-gen uses, by their documented C signatures.
#pragma once

#include <string>
#include <variant>

namespace ropegen::runtime {

struct CudaDriver {
  int (*init)(unsigned flags) = nullptr;                              // cuInit
  int (*device_count)(int* count) = nullptr;                          // cuDeviceGetCount
  int (*device_get)(int* device, int ordinal) = nullptr;              // cuDeviceGet
  int (*attribute)(int* value, int attribute, int device) = nullptr;  // cuDeviceGetAttribute
  int (*name)(char* name, int length, int device) = nullptr;          // cuDeviceGetName
  int (*primary_context_retain)(void** context, int device) = nullptr;  // cuDevicePrimaryCtxRetain
};

// The driver, or why it cannot be loaded (one sentence).
const std::variant<CudaDriver, std::string>& cuda_driver();

}  // namespace ropegen::runtime
