// Storage types of the spec's dtypes and the conversions to and from the
// float32 the math runs in. bf16 is kept as 16-bit words: loads widen with a
// shift; stores round as x86's vcvtneps2bf16 does (nearest even, denormals to
// zero), with the instruction on AVX512-BF16 CPUs and integer ops elsewhere,
// so every target gives the same bits (see storage.cpp).
#pragma once

#include <Halide.h>

#include "ropegen/spec.h"

namespace ropegen::lowering {

Halide::Type storage_type(DType dtype);
// True where the pipeline is compiled for a GPU (Vulkan, CUDA), resolved
// when it is compiled; a GPU target carries its host's CPU features too.
Halide::Expr compiled_for_gpu();
// True where the pipeline's target has any of `features`, resolved when it
// is compiled. Halide's x86 code generator completes a target's features
// (avx512_sapphirerapids and avx512_zen5 imply avx512_zen4, ...), but its
// target queries see only those named, and the host target names its CPU's
// newest level: a test of one feature misses the CPUs named by another.
Halide::Expr target_has_any_feature(std::initializer_list<Halide::Target::Feature> features);
Halide::Expr load_as_float(const Halide::Expr& stored, DType dtype);
// How a bf16 store rounds: always the same bits, but vcvtne2ps2bf16 exists
// in Halide only as a vector function (its runtime's vcvtne2ps2bf16x32), so
// only stages whose schedules never scalarize the store may ask for it (the
// rotation's output and k's cache rows; an additive encoding's guarded tail
// is scalar). Halide expressions cannot be changed by a schedule, so the
// algorithm states it where it builds the store.
enum class Bf16Rounding { IntegerOps, InstructionWhereAvailable };

Halide::Expr store_from_float(const Halide::Expr& value, DType dtype,
                              Bf16Rounding rounding = Bf16Rounding::IntegerOps);

}  // namespace ropegen::lowering
