// dL/d(inv_freq), backward with run-time frequencies: a sum over every row
// of q and k in one fixed order of float64 additions (token_sum.h): level 0
// (r, s, b): token (s, b)'s terms (position x dL/dangle of pair r), q's
// heads then k's; then the levels and the sum over tokens and sequences.
#pragma once

#include <Halide.h>

#include "lowering/token_sum.h"
#include "ropegen/rope_math.h"
#include "ropegen/spec.h"

namespace ropegen::lowering {

struct RopeAlgorithm;

struct FrequencyGradient {
  TokenSum sums;         // levels (r, s, b), sum (r) float64
  Halide::Func d_freqs;  // (r) float32, the output
  // The gradient's own copies of the per-(pair, token) stages, for the
  // schedules to place at level 0's tokens (the forward's are placed in the
  // rotation's loops). xpos_scale: undefined without xPos.
  Halide::Func reduced, cos_sin, xpos_scale;
};

// Reads saved_q (, saved_k): the forward's inputs.
void define_frequency_gradient(const RopeSpec& spec, RopeAlgorithm& a, const RopeFrequencies& freqs);

}  // namespace ropegen::lowering
