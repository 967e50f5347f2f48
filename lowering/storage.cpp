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

Expr compiled_for_gpu() { return target_has_any_feature({Target::Vulkan, Target::CUDA}); }

Expr target_has_any_feature(std::initializer_list<Target::Feature> features) {
  Expr any = Internal::const_false();
  for (Target::Feature f : features) any = any || target_has_feature(f);
  return any;
}

Expr load_as_float(const Expr& stored, DType dtype) {
  if (dtype == DType::BF16) return reinterpret<float>(cast<uint32_t>(stored) << 16);
  return cast<float>(stored);
}

namespace {

// float32 -> bfloat16 bits exactly as x86's vcvtneps2bf16 converts: round to
// nearest even; a denormal input becomes a zero of its sign (the instruction
// treats denormals as zero, and every target must give its bits); a NaN stays
// a quiet NaN with its sign and top payload bits.
Expr bf16_bits_like_vcvtneps2bf16(const Expr& value) {
  const Expr bits = reinterpret<uint32_t>(value);
  const Expr rounded = (bits + (((bits >> 16) & 1) + 0x7fff)) >> 16;
  const Expr denormal_or_zero = (bits & 0x7f800000) == 0;
  return cast<uint16_t>(select(is_nan(value), (bits >> 16) | 0x40, denormal_or_zero, (bits >> 16) & 0x8000, rounded));
}

// The instruction itself, through Halide's x86 runtime wrapper
// (vcvtne2ps2bf16x32, found by the fooxN naming convention). Halide 21 has
// the rule that would emit it from a bfloat16 cast commented out
// (Halide#7219), and its emulated cast turns a NaN with payload only in its
// low 16 bits into +-Inf. The call must only ever be vectorized (see
// Bf16Rounding), and tests/targets/cpu_code_test.cpp checks the
// instruction is there.
Expr bf16_bits_native(const Expr& value) {
  return Internal::Call::make(UInt(16), "vcvtne2ps2bf16", {value}, Internal::Call::PureExtern);
}

}  // namespace

Expr store_from_float(const Expr& value, DType dtype, Bf16Rounding rounding) {
  if (dtype != DType::BF16) return cast(storage_type(dtype), value);
  if (rounding == Bf16Rounding::IntegerOps) return bf16_bits_like_vcvtneps2bf16(value);
  // Resolved when the pipeline is compiled: CPU targets with AVX512-BF16
  // (Halide's avx512_zen4, or a level that implies it: an Intel Sapphire
  // Rapids host target names avx512_sapphirerapids, not avx512_zen4) run the
  // instruction, every other target the same rounding in integer ops.
  const Expr native =
      target_has_any_feature({Target::AVX512_Zen4, Target::AVX512_Zen5, Target::AVX512_SapphireRapids}) &&
      !compiled_for_gpu();
  return select(native, bf16_bits_native(value), bf16_bits_like_vcvtneps2bf16(value));
}

}  // namespace ropegen::lowering
