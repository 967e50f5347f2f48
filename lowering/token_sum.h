// Sums of per-token terms over every token and sequence of a call, in one
// fixed order of float64 additions, the same on every target (so the same
// bits everywhere, run after run), made of stages a schedule can compute in
// parallel (a GPU's on the device): level 0 (i, s, b): the caller's terms
// of token (s, b); level l (i, g, b): entries [g x kGroup, + kGroup) of
// level l - 1 along s (tokens from q's min s, then groups from 0); sum (i):
// every entry of the last level, s inner, b outer. Each is a pure 0 and one
// update per summed RDom. The gradients that are summed over a call's rows
// use it: dL/d(inv_freq) and the qk_norm weights'.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

namespace ropegen::lowering {

struct RopeAlgorithm;

struct TokenSum {
  static constexpr int kGroup = 64, kLevels = 2;
  std::vector<Halide::Func> levels;  // 1 + kLevels Funcs; levels[0] is the caller's
  Halide::Func sum;                  // (i) float64
};

// `token` (i, s, b): float64 terms over q's tokens and sequences (k has q's:
// call/prepare_call checks), named with `name`.
TokenSum sum_over_tokens(const Halide::Func& token, const Halide::Var& i, const RopeAlgorithm& a,
                         const std::string& name);

// A Func of `args` whose pure definition is a float64 zero, for the updates that sum into it.
Halide::Func float64_zeros(const std::string& name, const std::vector<Halide::Var>& args);

}  // namespace ropegen::lowering
