// Comparing a call's outputs: with the float64 reference (within the
// tests' tolerance) and with another run's bits (units in the last place).
#pragma once

#include <cstdint>
#include <vector>

#include "kit_case.h"

namespace kit {

// The worst |got - want| / (tolerance * max(1, |want|)) over the elements
// (<= 1 passes; infinity for a NaN or a size mismatch).
// `like`: the output's dtype (and fp8 format: codes are compared by value).
double worst_error(const std::vector<uint8_t>& got, const TensorData& like, const Truth& truth);

struct BitDiff {
  int64_t elements = 0, differing = 0, max_ulp = 0;
};
// Elements of a and b (stored values of `dtype`) whose bits differ, and by
// how many units in the last place at most (+0 and -0 count as equal; fp8
// codes: neighbouring codes are 1 apart).
BitDiff bit_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, ropegen_dtype dtype);

}  // namespace kit
