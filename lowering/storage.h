// Storage types of the spec's dtypes and the conversions to and from the
// float32 the math runs in. bf16 is kept as 16-bit words: loads widen with a
// shift; stores round as x86's vcvtneps2bf16 does (nearest even, denormals to
// zero), with the instruction on AVX512-BF16 CPUs and integer ops elsewhere,
// so every target gives the same bits (see storage.cpp).
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

Halide::Type storage_type(DType dtype);
Halide::Expr load_as_float(const Halide::Expr& stored, DType dtype);
Halide::Expr store_from_float(const Halide::Expr& value, DType dtype);

}  // namespace ropegen::lowering
