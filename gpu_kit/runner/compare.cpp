#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace kit {
namespace {

// An fp8 code's value: OCP e4m3fn (bias 7, S.1111.111 NaN, no infinities)
// or e5m2 (bias 15, IEEE-like).
double fp8_value(uint8_t code, const std::string& format) {
  const bool e4m3 = format == "fp8_e4m3";
  const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exponent = (code & 0x7f) >> mantissa_bits, mantissa = code & ((1 << mantissa_bits) - 1);
  const double sign = code & 0x80 ? -1.0 : 1.0;
  if (e4m3 && (code & 0x7f) == 0x7f) return std::numeric_limits<double>::quiet_NaN();
  if (!e4m3 && exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - mantissa_bits);
  return sign * std::ldexp((1 << mantissa_bits) + mantissa, exponent - bias - mantissa_bits);
}

double value(const uint8_t* p, ropegen_dtype t, const std::string& fp8) {
  if (t.bits == 8) return fp8_value(*p, fp8);
  if (t.bits == 32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (t.code == ROPEGEN_DTYPE_BFLOAT) {
    const uint32_t bits = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  _Float16 f;  // IEEE binary16 (GCC and Clang on x86-64 and AArch64)
  std::memcpy(&f, &h, 2);
  return static_cast<double>(f);
}

// Bits mapped to a line on which neighbouring values are neighbouring integers.
int64_t ordered(const uint8_t* p, ropegen_dtype t) {
  if (t.bits == 8) return *p & 0x80 ? -(*p & 0x7f) : (*p & 0x7f);  // sign and magnitude
  if (t.bits == 32) {
    int32_t b;
    std::memcpy(&b, p, 4);
    return b < 0 ? int64_t{INT32_MIN} - b : b;
  }
  int16_t b;
  std::memcpy(&b, p, 2);
  return b < 0 ? int64_t{INT16_MIN} - b : b;
}

}  // namespace

double worst_error(const std::vector<uint8_t>& got, const TensorData& like, const Truth& truth) {
  const ropegen_dtype dtype = like.dtype;
  const size_t eb = dtype_bytes(dtype);
  if (got.size() != truth.values.size() * eb) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < truth.values.size(); ++i) {
    const double want = truth.values[i], v = value(&got[i * eb], dtype, like.fp8);
    const double err = std::abs(v - want) / (truth.tolerance * std::max(1.0, std::abs(want)));
    if (!(err <= worst)) worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
  }
  return worst;
}

BitDiff bit_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, ropegen_dtype dtype) {
  const size_t eb = dtype_bytes(dtype);
  BitDiff d;
  d.elements = static_cast<int64_t>(std::min(a.size(), b.size()) / eb);
  if (a.size() != b.size()) d.differing = std::max(a.size(), b.size()) / eb, d.max_ulp = std::numeric_limits<int64_t>::max();
  for (int64_t i = 0; i < d.elements; ++i) {
    const int64_t ulp = std::abs(ordered(&a[i * eb], dtype) - ordered(&b[i * eb], dtype));
    if (ulp != 0) ++d.differing, d.max_ulp = std::max(d.max_ulp, ulp);
  }
  return d;
}

}  // namespace kit
