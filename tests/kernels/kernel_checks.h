// Kernel checks beyond the case sweeps, on any target: accuracy of
// cos/sin at long context, and q/k as strided views into a fused qkv
// buffer (rotated where they lie, everything else untouched).
#pragma once

#include <cstdint>
#include <vector>

#include <Halide.h>

#include "kernels/kernel_case.h"

namespace ropegen::test {

// How the accuracy check gives its positions (each a different integer
// path into lowering/trig.h's fixed-point reduction): int64 ids, int32 ids,
// or implicit positions (the last 4096 up to max_position, offset + index).
enum class TrigPositions { Int64Ids, Int32Ids, Implicit };

// The largest |error| of the kernel's cos and sin (outputs of (1, 0) pairs)
// at positions spread up to max_position, against long double. `outputs`,
// if given, receives the kernel's raw outputs (for bitwise comparisons).
double max_trig_error(double theta, int64_t max_position, const Halide::Target& target,
                      std::vector<float>* outputs = nullptr, TrigPositions positions = TrigPositions::Int64Ids);

// The largest |error| of the sinusoidal PE (dim 128, base 10000,
// interleaved: column 2i sin, 2i + 1 cos; x = 0) at positions spread up to
// max_position (ids), or the last 4096 up to it (implicit, from an
// offset), against long double.
double max_sinusoidal_error(int64_t max_position, const Halide::Target& target, TrigPositions positions);

// gtest failures if the fused-qkv views are not rotated exactly where they
// lie (bshd or sbhd; in place or into a canary-filled output), the buffers
// in `memory` (device: q and k views of one device allocation).
void check_fused_qkv(const char* layout, bool in_place, const Halide::Target& target, Memory memory = Memory::Host);

}  // namespace ropegen::test
