#pragma once

#include <string>

#include "cuda_driver.h"

namespace kit {

// The bench table (gpu_kit/README.md): each bench spec's kernel in place on
// device tensors against a device-to-device copy of the same bytes in this
// process (CUDA events, L2 flushed before every timed call), in GB/s and as
// a ratio; then microseconds per call at decode sizes, launched one by one
// and replayed from a CUDA graph. `quick`: fewer repetitions (a smoke run).
int run_bench(const std::string& dir, const CudaDriver& cuda, bool quick, const std::string& json_path);

}  // namespace kit
