#include "storage.h"

namespace ropegen::lowering {

using namespace Halide;

Type storage_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return Float(32);
    case DType::F16: return Float(16);
    case DType::BF16: return UInt(16);  // bfloat16 bit patterns
  }
  return Float(32);
}

Expr load_as_float(const Expr& stored, DType dtype) {
  if (dtype == DType::BF16) return reinterpret<float>(cast<uint32_t>(stored) << 16);
  return cast<float>(stored);
}

Expr store_from_float(const Expr& value, DType dtype) {
  if (dtype != DType::BF16) return cast(storage_type(dtype), value);
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
  const Expr bits = reinterpret<uint32_t>(value);
  const Expr rounded = (bits + (0x7fff + ((bits >> 16) & 1))) >> 16;
  // NaN stays a (quiet) NaN instead of rounding into infinity.
  return cast<uint16_t>(select(is_nan(value), (bits >> 16) | 0x40, rounded));
}

}  // namespace ropegen::lowering
