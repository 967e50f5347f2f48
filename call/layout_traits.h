// The one table of layouts: where a tensor of each layout keeps the
// kernels' (d, h, s, b) dims. bsd, sbd and td have one head; thd and td
// one batch (a packed sequence of T tokens, cu_seqlens split it).
#pragma once

#include <cstdint>

#include "call/fixed_vector.h"
#include "ropegen/spec.h"
#include "ropegen/tensor.h"

namespace ropegen::call {

// A shape by value (no allocation: calls compare several).
using Shape = FixedVector<int64_t, kMaxRank>;

struct LayoutTraits {
  int rank;            // dims of a tensor
  int d, h, s, b;      // their index in the shape; -1: absent (one head, one batch)
  Layout with_heads;   // the layout with a heads dim: bsd -> bshd, sbd -> sbhd, td -> thd
  const char* name;    // "bshd": the spec's spelling (call/ does not link dsl/)
  const char* dims;    // "[B, S, H, D]"

  bool packed() const { return b < 0; }
  // The shape positions have: the token dims in the layout's order
  // ([B, S], [S, B], [T]).
  Shape token_dims(const int64_t* shape) const;
  int64_t batch(const int64_t* shape) const { return b < 0 ? 1 : shape[b]; }
};

const LayoutTraits& layout_traits(Layout layout);

}  // namespace ropegen::call
