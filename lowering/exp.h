// e^x for the xPos scale, the same arithmetic on every target: the
// argument's reduction by ln 2 in float64, a float32 polynomial, an exact
// power of two. Halide's exp lowers to each backend's own (Halide's
// polynomial on CPU, libdevice on CUDA, GLSL Exp on Vulkan, 3 ulp), which
// differ in the last bits; this does not.
#pragma once

#include <string>

#include <Halide.h>

namespace ropegen::lowering {

// e^x rounded to float32, x float64. Overflows to inf above ~88.7 and is
// 0 below -174.5 (results under 2^-126 may be flushed to 0 on GPUs).
// `name` prefixes its constants' names, unique in a pipeline.
Halide::Expr exp_to_float(const Halide::Expr& x_f64, const std::string& name);

}  // namespace ropegen::lowering
