// What the call boundary and the kernels agree on besides the arguments
// (arguments.h): where each layout keeps the kernels' (d, h, s, b) dims,
// which pairing a kernel reads and writes, and the view of a row's rotary
// dims a rope kernel writes. call/ builds its views by these rules,
// lowering/ declares its buffers by them, runtime/ stages by them.
#pragma once

#include <utility>

#include "ropegen/spec.h"

namespace ropegen::abi {

// ---- Layouts: one row each ----
struct LayoutTraits {
  Layout layout;
  int rank;           // dims of a tensor
  int d, h, s, b;     // their index in the shape; -1: absent (one head, one batch)
  Layout with_heads;  // the layout with a heads dim: bsd -> bshd, sbd -> sbhd, td -> thd
  const char* name;   // "bshd": the spec's spelling
  const char* dims;   // "[B, S, H, D]"

  constexpr bool packed() const { return b < 0; }
  constexpr int64_t batch(const int64_t* shape) const { return b < 0 ? 1 : shape[b]; }
};

// bsd, sbd and td have one head; thd and td one batch (a packed sequence of
// T tokens, cu_seqlens split it).
// clang-format off
inline constexpr LayoutTraits kLayouts[] = {
  //                rank  d  h  s   b
  {Layout::BSHD,    4,    3, 2, 1,  0, Layout::BSHD, "bshd", "[B, S, H, D]"},
  {Layout::BHSD,    4,    3, 1, 2,  0, Layout::BHSD, "bhsd", "[B, H, S, D]"},
  {Layout::SBHD,    4,    3, 2, 0,  1, Layout::SBHD, "sbhd", "[S, B, H, D]"},
  {Layout::THD,     3,    2, 1, 0, -1, Layout::THD,  "thd",  "[T, H, D]"},
  {Layout::BSD,     3,    2, -1, 1, 0, Layout::BSHD, "bsd",  "[B, S, D]"},
  {Layout::SBD,     3,    2, -1, 0, 1, Layout::SBHD, "sbd",  "[S, B, D]"},
  {Layout::TD,      2,    1, -1, 0, -1, Layout::THD, "td",   "[T, D]"},
};
// clang-format on

constexpr const LayoutTraits& layout_traits(Layout layout) { return kLayouts[static_cast<int>(layout)]; }

// The layout of a spec's tensors as a call passes them: ALiBi's scores
// [B, H, Sq, Sk] are bhsd (keys as the row, query rows as tokens).
constexpr Layout tensor_layout(Encoding encoding, Layout spec_layout) {
  return encoding == Encoding::Alibi ? Layout::BHSD : spec_layout;
}

// ---- Pairings ----
// A backward kernel (the gradient: rotation by -angle) reads the gradient
// where the forward wrote (output_pairing) and writes where it read
// (pairing).
struct KernelPairing {
  Pairing read, write;
};
constexpr KernelPairing kernel_pairing(Pairing pairing, Pairing output_pairing, bool backward) {
  return backward ? KernelPairing{output_pairing, pairing} : KernelPairing{pairing, output_pairing};
}

// ---- The rotary output view ----
// A rope kernel writes the rotary dims [offset, offset + rotary_dim) of a
// row as two dims, member m of pair r: written half-split, (r, m) with
// strides (1, rotary_dim / 2); interleaved, (m, r) with strides (1, 2)
// (in units of the row's stride). Dim 0 is the dense one either way. The
// dims after them are the row tensor's (h, s, b).
struct RotaryView {
  int extent0, stride0, extent1, stride1;
  bool pairs_first;  // dim 0 is the pair r (half), else the member m (interleaved)
};
constexpr RotaryView rotary_view(Pairing write, int rotary_dim) {
  const int half = rotary_dim / 2;
  return write == Pairing::Interleaved ? RotaryView{2, 1, half, 2, false} : RotaryView{half, 1, 2, half, true};
}

// Dim of member m of pair r of a row in a pairing.
constexpr int dim_of(Pairing pairing, int rotary_offset, int rotary_dim, int r, int m) {
  return pairing == Pairing::Interleaved ? rotary_offset + 2 * r + m : rotary_offset + r + m * (rotary_dim / 2);
}

// The dims outside the rotary range, as (first, count) ranges (at most two;
// count 0: none). Out of place, rope copies them unchanged.
struct DimRange {
  int first, count;
};
struct PassThroughRanges {
  DimRange before, after;
};
constexpr PassThroughRanges pass_through_ranges(int row_dim, int rotary_offset, int rotary_dim) {
  const int after = rotary_offset + rotary_dim;
  return {{0, rotary_offset}, {after, row_dim - after}};
}

}  // namespace ropegen::abi
