// Storage types of the spec's dtypes and the conversions to and from the
// float32 the math runs in. bf16 is kept as 16-bit words and converted with
// integer vector ops (a shift on load; round to nearest even on store), which
// every target runs natively, where Halide's bfloat16 is emulated.
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

Halide::Type storage_type(DType dtype);
Halide::Expr load_as_float(const Halide::Expr& stored, DType dtype);
Halide::Expr store_from_float(const Halide::Expr& value, DType dtype);

}  // namespace ropegen::lowering
