// The positions rope-gen accepts, for every encoding and every way of giving
// them (ids, offset + index, table rows): 0..kMaxPosition. The kernels reduce
// position * inv_freq exactly, but inv_freq is a float64, so the angle's
// error grows with the position: measured on the CPU kernel (inv_freq <= 1,
// cos/sin against long double) it is 7.2e-7 at 2^32, 6.2e-5 at 2^40 and 0.06
// at 2^50. Positions past 2^32 are refused rather than rotated by a wrong
// angle; no model's context comes near. Negative positions are refused: HF
// and the engines use ids >= 0.
#pragma once

#include <cstdint>

namespace ropegen {

constexpr int64_t kMaxPosition = int64_t{1} << 32;
// How messages and docs write kMaxPosition.
constexpr const char* kMaxPositionText = "2^32";

inline bool is_valid_position(int64_t p) { return p >= 0 && p <= kMaxPosition; }

}  // namespace ropegen
