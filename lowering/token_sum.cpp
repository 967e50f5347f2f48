#include "lowering/token_sum.h"

#include "lowering/rope_algorithm.h"

namespace ropegen::lowering {

using namespace Halide;

Func float64_zeros(const std::string& name, const std::vector<Var>& args) {
  Func f(name);
  f(args) = cast<double>(0);
  return f;
}

TokenSum sum_over_tokens(const Func& token, const Var& i, const RopeAlgorithm& a, const std::string& name) {
  TokenSum t;
  t.levels = {token};
  const ImageParam& q = a.q.input;
  Expr first = q.dim(2).min(), entries = q.dim(2).extent();  // along s, per sequence, of the level below
  for (int level = 1; level <= TokenSum::kLevels; ++level) {
    Func sums = float64_zeros(name + "_level" + std::to_string(level), {i, a.s, a.b});
    RDom u(0, TokenSum::kGroup, sums.name() + "_entries");
    // The last group stops at the level below's last entry.
    const Expr at = a.s * TokenSum::kGroup + u;
    u.where(at < entries);
    sums(i, a.s, a.b) += t.levels.back()(i, first + at, a.b);
    t.levels.push_back(sums);
    first = 0;
    entries = (entries + TokenSum::kGroup - 1) / TokenSum::kGroup;
  }
  t.sum = float64_zeros(name + "_sum", {i});
  RDom rest(0, entries, q.dim(3).min(), q.dim(3).extent(), name + "_groups");
  t.sum(i) += t.levels.back()(i, rest.x, rest.y);
  return t;
}

}  // namespace ropegen::lowering
