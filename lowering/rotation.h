// The rotation of q and k: x0 c - x1 s and x1 c + x0 s per pair (backward:
// by -angle), times the xPos scale, stored in the output pairing.
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

struct RopeAlgorithm;
struct RotatedTensor;

// Dim of member m of pair r in a pairing (abi::dim_of, on Exprs).
Halide::Expr dim_of(const RopeSpec& spec, Pairing pairing, const Halide::Expr& r, const Halide::Expr& m);

// t.rotated and (with_output) t.output; `spec` is the kernel's
// (kernel_spec): it reads in `pairing` and writes in `output_pairing`.
// cos_sin and xpos_scale: a's, unless given (the KV-cache rows' own copies).
void define_rotation(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t, bool is_key,
                     bool with_output = true, Halide::Func cos_sin = Halide::Func(),
                     Halide::Func xpos_scale = Halide::Func());

// A rotated tensor's value at dim d of a whole row (the output pairing's
// member in the rotary range, `outside` elsewhere), head h.
Halide::Expr whole_row(const RopeSpec& spec, const RopeAlgorithm& a, const RotatedTensor& t,
                       const Halide::Expr& outside, const Halide::Expr& h);

// Whole-row outputs (qk_norm, output_dtype fp8): rows (d, h, s, b), the
// rotary dims from t.rotated, the others from t.normed (qk_norm) or the
// input; stored in the spec's dtype, or as fp8 codes of x / q_scale
// (k_scale for keys), or with output_quant (q) of x / its group's scale,
// the scales in t.out_scales.
void define_whole_row_output(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, bool is_key);

}  // namespace ropegen::lowering
