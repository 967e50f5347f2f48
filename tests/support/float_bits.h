// A float32's bits and back (C++17: no std::bit_cast).
#pragma once

#include <cstdint>
#include <cstring>

namespace ropegen::test {

inline float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint32_t bits_of(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

}  // namespace ropegen::test
