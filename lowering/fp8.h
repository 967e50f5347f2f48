// fp8 KV-cache codes (kv_cache dtype fp8_e4m3 | fp8_e5m2, stored as uint8),
// in integer and float ops that round the same on every target.
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

// The code of value / scale as vLLM's fp8 KV caches store it
// (reshape_and_cache: float32 division, then CUDA's __nv_cvt_float_to_fp8
// with __NV_SATFINITE): the quotient rounded to float32 (exactly on every
// target, see fp8.cpp), saturated to +-max (infinities too), rounded to
// nearest even. fp8_e4m3 is OCP's e4m3fn (no infinities, max 448, NaN
// 0x7f); fp8_e5m2 has max 57344. A NaN is 0x7f with value's sign. scale is
// finite and > 0 (prepare_call checks it). Fp8Scale::Multiply: the code of
// value * scale instead (FlashInfer's RopeQuantizeKernel: a float32
// product, then the same conversion).
Halide::Expr fp8_from_float(const Halide::Expr& value, const Halide::Expr& scale, KvDType format,
                            Fp8Scale rule = Fp8Scale::Divide);

// The format's largest finite value: 448 (fp8_e4m3), 57344 (fp8_e5m2).
float fp8_largest(KvDType format);

namespace detail {
// x / scale correctly rounded to float32 from an approximate quotient q0
// (a GPU's division, within 2 ulp), by the exact float64 residuals of q0
// and its neighbours (fp8.cpp). Exposed for tests.
Halide::Expr correctly_rounded_quotient(const Halide::Expr& x, const Halide::Expr& scale, const Halide::Expr& q0);
}  // namespace detail

}  // namespace ropegen::lowering
