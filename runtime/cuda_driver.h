// The CUDA driver API as rope-gen calls it itself (base/cuda_driver_api.h):
// libcuda.so.1 (what the driver installs; libcuda.so, which only development
// packages provide, as a fallback) loaded once per process and kept: rope-gen
// never links against the driver and adds nothing to the process's global
// symbols.
#pragma once

#include <string>
#include <variant>

#include "base/cuda_driver_api.h"

namespace ropegen::runtime {

using CudaDriver = ropegen_cuda_driver;

// The driver, or why it cannot be loaded (one sentence).
const std::variant<CudaDriver, std::string>& cuda_driver();

}  // namespace ropegen::runtime
