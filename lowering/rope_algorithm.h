// The RoPE algorithm as Halide Funcs — what is computed, never how (the
// schedules live in targets/). Tensors are seen logically as (d, h, s, b):
// head dim (dense), head, token, batch; every layout maps onto that with
// strides, so one algorithm serves bshd, bhsd, sbhd and thd (B = 1).
#pragma once

#include <vector>

#include <Halide.h>

#include "lowering/storage.h"
#include "ropegen/spec.h"

namespace ropegen::lowering {

// What varies between kernels of one spec.
struct KernelVariant {
  bool with_k = false;                          // rotate k in the same call
  Halide::Type position_type = Halide::Int(32); // explicit positions: int32 or int64
};

// One rotated tensor (q or k): its input and the stages the schedule places.
// The output is the rotary part only, as a strided view the runtime builds:
// half (output) pairing (r, m, h, s, b) with m's stride rotary_dim/2;
// interleaved (m, r, h, s, b) with r's stride 2 — dim 0 is dense either way. Dims
// outside the rotary range are never written (see PassThroughCopy).
struct RotatedTensor {
  Halide::ImageParam input;  // (d, h, s, b), the whole head
  Halide::Func rotated;      // (r, m, h, s, b): member m of pair r, float32
  Halide::Func output;       // rotary view, spec dtype
};

struct RopeAlgorithm {
  Halide::Var d{"d"}, h{"h"}, s{"s"}, b{"b"}, r{"r"}, m{"m"};

  // Run-time arguments (only those the spec needs appear in arguments()).
  Halide::ImageParam positions;   // (s, b) explicit position ids
  Halide::ImageParam cu_seqlens;  // (n + 1) thd sequence starts, int32
  Halide::Param<int64_t> offset{"offset", 0};
  Halide::Param<int64_t> seq_len{"seq_len", 1};

  Halide::Func position;      // (s, b) float64
  Halide::Func inv_freq;      // (r) float64, after scaling
  Halide::Func reduced;       // (r, s, b) -> {angle mod pi/2 (float32), quadrant}
  Halide::Func cos_sin;       // (r, s, b) -> {cos, sin} * attention factor, float32
  Halide::Func xpos_scale;    // (r, s, b) -> {query scale s_r^p, key scale s_r^-p}; undefined without xPos

  RotatedTensor q, k;         // k.output is undefined unless the variant has k
  KernelVariant variant;
  // Which run-time arguments the spec reads; arguments() lists exactly these.
  bool uses_positions = false, uses_cu_seqlens = false, uses_offset = false, uses_seq_len = false;

  std::vector<Halide::Argument> arguments() const;
  std::vector<Halide::Func> outputs() const;
};

// Copies the dims outside the rotary range for out-of-place calls on a
// partial-rotary spec: output(d, h, s, b) = input(d, h, s, b) on a view of one range.
struct PassThroughCopy {
  Halide::ImageParam input;
  Halide::Func output;
  Halide::Var d{"d"}, h{"h"}, s{"s"}, b{"b"};
};
PassThroughCopy build_pass_through_copy(const RopeSpec& spec);

// Builds the algorithm; every constant comes from rope_math.
RopeAlgorithm build_rope_algorithm(const RopeSpec& spec, const KernelVariant& variant);

}  // namespace ropegen::lowering
