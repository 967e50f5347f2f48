// Target names as users write them (--target host, --targets host,arm-64-linux)
// and the Halide targets they mean.
#pragma once

#include <string>

#include <Halide.h>

#include "ropegen/result.h"

namespace ropegen::targets {

// "host" is the machine rope-gen runs on; anything else is a Halide target
// string (x86-64-linux-avx2, arm-64-linux, ...).
Result<Halide::Target> parse_target(const std::string& name);

}  // namespace ropegen::targets
