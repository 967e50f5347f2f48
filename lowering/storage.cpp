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

namespace {

// float32 -> bfloat16 bits, rounded to nearest even in integer ops; NaN
// stays a (quiet) NaN with its sign and top payload bits, as
// vcvtneps2bf16 does.
Expr bf16_bits_nearest_even(const Expr& value) {
  const Expr bits = reinterpret<uint32_t>(value);
  const Expr rounded = (bits + (((bits >> 16) & 1) + 0x7fff)) >> 16;
  return cast<uint16_t>(select(is_nan(value), (bits >> 16) | 0x40, rounded));
}

}  // namespace

Expr store_from_float(const Expr& value, DType dtype) {
  if (dtype != DType::BF16) return cast(storage_type(dtype), value);
  // Halide's bfloat16 cast rounds to nearest even, emulated in integer ops on
  // every CPU (Halide 21 disables its f32->bf16 rules, Halide#7219; a NaN
  // with payload only in its low 16 bits becomes +-Inf there). Halide
  // 21's Vulkan backend compiles that cast as a float16 conversion, so GPU
  // targets spell the same rounding out in integer ops (resolved when the
  // pipeline is compiled: one algorithm, the same bits everywhere).
  const Expr on_gpu = target_has_feature(Target::Vulkan) || target_has_feature(Target::CUDA);
  return select(on_gpu, bf16_bits_nearest_even(value), reinterpret<uint16_t>(cast(BFloat(16), value)));
}

}  // namespace ropegen::lowering
