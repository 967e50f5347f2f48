// The position each pair of each token is rotated by: explicit ids, or
// offset + index (thd / td: restarting at every cu_seqlens start).
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

struct RopeAlgorithm;

// a.position (float64) and a.position_id (the integer id) of token (s, b)
// on axis `axis`; marks the arguments read as used, and
// a.cos_sin_shared_by_batch.
void define_positions(const RopeSpec& spec, RopeAlgorithm& a, const Halide::Expr& axis);

// Multi-axis specs: the axis of pair r (rope_math's pair_axes); 0 otherwise.
Halide::Expr pair_axis(const RopeSpec& spec, const Halide::Var& r);

}  // namespace ropegen::lowering
