// User tensors (shape and strides in the spec's layout) seen the way the
// kernels see them: (d, h, s, b) with strides, no copy. Tensors keep their
// 64-bit strides (TensorView, cut into Halide buffers by call_parts);
// position ids, small and dense, are Halide buffers at once.
#pragma once

#include <cstdint>
#include <vector>

#include <Halide.h>

#include "ropegen/spec.h"
#include "runtime/kernel.h"

namespace ropegen::runtime {

// shape/strides in elements, in the layout's own order: bshd [B,S,H,D],
// bhsd [B,H,S,D], sbhd [S,B,H,D], thd [T,H,D]; bsd [B,S,D], sbd [S,B,D] and
// td [T,D] are seen with one head.
TensorView logical_tensor(void* data, Halide::Type type, Layout layout, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& strides);

// Position ids shaped as the layout's token dims ([B,S] bshd/bhsd/bsd,
// [S,B] sbhd/sbd, [T] thd/td) or [S] (shared across the batch), seen as
// (s, b); multi-axis ids (axes > 0) have a trailing [axes] dim, seen as
// (axis, s, b). Throws std::invalid_argument for ids too many for a
// 32-bit buffer.
Halide::Buffer<> logical_positions(void* data, Halide::Type type, Layout layout, const std::vector<int64_t>& shape,
                                   int64_t batch, int axes = 0);

// The rotary part of a logical (d, h, s, b) buffer (one part of a call,
// call_parts.h) as the kernels' output view, by output pairing: half
// (r, m, h, s, b), interleaved (m, r, h, s, b); the part's mins are kept.
Halide::Buffer<> rotary_view(const Halide::Buffer<>& logical, const RopeSpec& spec);
// Dims [first, first + count) of a logical tensor, as (d, h, s, b).
Halide::Buffer<> dim_range_view(const Halide::Buffer<>& logical, int first, int count);

// Dense row-major strides for a shape.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape);

}  // namespace ropegen::runtime
