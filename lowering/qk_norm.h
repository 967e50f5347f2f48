// qk_norm: q and k normalised per head before the rotation. x̂ = x / rms
// · w' with rms = sqrt(mean over the head's dims of x² + eps) (w' = w,
// 1 + w, or 1 without a weight). The sum of squares is float64 (each
// square exact) in one fixed order: eight interleaved partial sums (dim
// 8i + j into sum j), then the eight in turn, so every target and schedule
// adds alike; 1 / rms is the float32 nearest it (found with float64
// multiplies only); x̂ itself is float32, rounded once more at the store.
#pragma once

#include <Halide.h>

#include "abi/arguments.h"
#include "ropegen/spec.h"

namespace ropegen::lowering {

struct RopeAlgorithm;
struct RotatedTensor;

// The partial sums' count: the sum's order, part of the algorithm.
inline constexpr int kNormPartialSums = 8;

// t.square_sums (j, h, s, b), t.inv_rms (h, s, b) and t.normed (d, h, s,
// b), reading t.input and the weight argument `weight` (q_norm_weight or
// k_norm_weight) when the spec has one.
void define_qk_norm(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, abi::Arg weight);

// The backward (variant.backward): t.input is dL/d(out), t.rotated its
// rotary dims rotated back (define_rotation, before this); reads the
// forward input `saved` (saved_q or saved_k) and the weight; defines
// t.square_sums, t.inv_rms (of the forward input), t.normed_gradient,
// t.dot_sums, t.norm_coefficient and t.output = dL/dx, whole rows:
// dL/dx = (g - x (g . x) / (head_dim rms^2)) / rms, g = dL/d(normed) w'.
// g . x is float64 in the squares' order; -(g . x) / (head_dim rms^2) is
// the float32 nearest its float64 product; then one fused multiply-add
// and one multiply, each rounded as on every target.
void define_qk_norm_backward(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, abi::Arg weight, abi::Arg saved);

// dL/d(weight) of t (the backward of weight per_head, after
// define_qk_norm_backward): over t's rows, dL/d(normed) x / rms summed in
// token_sum's order (level 0: the token's heads in turn) into `output`
// (d_q_norm_weight or d_k_norm_weight), from the gradient's own rotation
// back (with a.norm_gradient's cos/sin), sums of squares and 1 / rms: t's
// are placed in its output's loops.
void define_norm_weight_gradient(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t, bool is_key,
                                 abi::Arg output);

}  // namespace ropegen::lowering
