// Storage types of the spec's dtypes and the conversions to and from the
// float32 the math runs in. bf16 is kept as 16-bit words: loads widen with a
// shift (an integer vector op on every target); stores use Halide's
// round-to-nearest-even cast (Halide 21 emulates it in integer ops on every
// CPU, AVX512-BF16 included: no vcvtneps2bf16; see storage.cpp).
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

Halide::Type storage_type(DType dtype);
Halide::Expr load_as_float(const Halide::Expr& stored, DType dtype);
Halide::Expr store_from_float(const Halide::Expr& value, DType dtype);

}  // namespace ropegen::lowering
