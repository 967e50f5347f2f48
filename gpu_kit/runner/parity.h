#pragma once

#include <string>
#include <vector>

#include "cuda_driver.h"
#include "kit_case.h"

namespace kit {

// Every case in every form it takes (out of place, in place, fused qkv) on
// the host, checked against the float64 reference and against the host's
// out-of-place bits; with `cuda`, also on the device, checked against the
// reference and bit for bit against the host in the same form. Prints a
// table per case source and the first failures; returns the exit status
// (0: everything passed).
int run_parity(const std::string& dir, const std::vector<KitCase>& cases, const CudaDriver* cuda);

}  // namespace kit
