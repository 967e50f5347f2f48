// The golden vectors that carry tensors (tests/golden/data), as requests.
// Apart from make_cases.cpp: tests/support/golden.h and the kernel sweeps
// both name a struct EncodingCase.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/host_apply.h"

namespace ropegen::kit {

// (spec text, request); the float64 reference is their truth (the peers'
// own outputs are checked by tests/golden's tests).
std::vector<std::pair<std::string, runtime::ApplyRequest>> golden_vectors();

}  // namespace ropegen::kit
