// The sweeps of the spec space every backend's kernel test runs (CPU,
// Vulkan, CUDA), as lists of cases (kernel_case.h): one list per concern,
// so a failing test names what broke.
#pragma once

#include <vector>

#include "kernels/kernel_case.h"

namespace ropegen::test {

// layout x pairing x dtype x scaling, on a partial rotary range that is not
// a vector multiple, with k (GQA) and an offset.
std::vector<Case> sweep_layouts_pairings_dtypes_scalings();
// Explicit int32 / int64 ids, per sequence or shared by the batch.
std::vector<Case> sweep_explicit_positions();
// In place, on rows too long for the compiler to keep every loaded vector.
std::vector<Case> sweep_in_place();
// S = 1, H = 1, head dims 2 and 4, rotary dims that are no vector multiple.
std::vector<Case> sweep_odd_sizes();
// DeepSeek-V3's rope_interleave (read interleaved, write half) and back.
std::vector<Case> sweep_output_pairing();
// xPos, LongRoPE both lists, pixel and custom frequencies.
std::vector<Case> sweep_xpos_longrope_schemes();
// What GPU schedules decide on (targets/gpu_schedule.cpp): head dims past
// shared memory, chunk counts that are no power of two, many heads (head
// groups), many token blocks, several sequences.
std::vector<Case> sweep_gpu_shapes();

// qk_norm: head dims 64, 128, 256 and 130, partial rotary with offsets,
// both pairings and an output pairing, every dtype, rms and rms_one_plus,
// weight per_head and none, float32 weights of bf16 and f16 rows, GQA, q
// alone, in place, every layout.
std::vector<Case> sweep_qk_norm();

// output_dtype fp8_e4m3 / fp8_e5m2: every dtype, partial rotary with dims
// on both sides of the range, both pairings and an output pairing, scales
// that saturate and scales that are no power of two (a scale applied on the
// wrong side moves every code), GQA, q alone, qk_norm, odd head dims.
std::vector<Case> sweep_fp8_output();

// The same cases, backward (their q and k as upstream gradients; qk_norm
// with weights out of place, as its backward runs).
std::vector<Case> backward_of(std::vector<Case> cases);

}  // namespace ropegen::test
