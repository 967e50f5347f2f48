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
  // Halide's bfloat16 cast rounds to nearest even: one instruction where the
  // target has it (AVX512-BF16), Halide's integer emulation elsewhere.
  return reinterpret<uint16_t>(cast(BFloat(16), value));
}

}  // namespace ropegen::lowering
