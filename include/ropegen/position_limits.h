// The positions rope-gen accepts, for every encoding and every way of giving
// them (ids, offset + index, table rows): 0..kMaxPosition. Up to there
// float64 holds a position exactly and the kernels' angle reduction still
// gives a rotation (checked at 2^53 with inv_freq 1; at 2^58 it no longer
// does). Negative positions are refused: HF and the engines use ids >= 0.
#pragma once

#include <cstdint>

namespace ropegen {

constexpr int64_t kMaxPosition = int64_t{1} << 53;

inline bool is_valid_position(int64_t p) { return p >= 0 && p <= kMaxPosition; }

}  // namespace ropegen
