#include "lowering/positions.h"

#include "abi/kernel_abi.h"
#include "lowering/constant_table.h"
#include "lowering/rope_algorithm.h"
#include "ropegen/rope_math.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {
// The position as float64 and as an integer (int32 ids stay int32).
std::pair<Expr, Expr> position_exprs(const RopeSpec& spec, RopeAlgorithm& a, const Expr& axis) {
  Expr id;
  if (spec.positions == PositionsMode::Explicit) {
    a.use(Arg::Positions);
    const ImageParam& ids = a.input(Arg::Positions);
    id = spec.axes.enabled() ? ids(axis, a.s, a.b) : ids(a.s, a.b);
  } else {
    a.use(Arg::Offset);
    id = a.scalar(Arg::Offset) + a.s;
  }
  if (spec.positions == PositionsMode::Implicit && abi::layout_traits(spec.layout).packed()) {
    a.use(Arg::CuSeqlens);
    const ImageParam& cu_seqlens = a.input(Arg::CuSeqlens);
    // The sequence of token s: how many starts cu[1 .. n-1] are <= s.
    RDom later_starts(1, cu_seqlens.dim(0).extent() - 2, "later_starts");
    Func sequence("sequence");
    sequence(a.s) = 0;
    sequence(a.s) += select(cu_seqlens(later_starts) <= a.s, 1, 0);
    id -= cu_seqlens(clamp(sequence(a.s), 0, cu_seqlens.dim(0).extent() - 1));
  }
  return {cast<double>(id), id};
}
}  // namespace

void define_positions(const RopeSpec& spec, RopeAlgorithm& a, const Expr& axis) {
  a.position = Func("position");
  a.position_id = Func("position_id");
  const auto [position, id] = position_exprs(spec, a, axis);
  a.position(a.r, a.s, a.b) = position;
  a.position_id(a.r, a.s, a.b) = id;
  // offset + s in every sequence
  a.cos_sin_shared_by_batch = a.uses(Arg::Offset) && !a.uses(Arg::CuSeqlens);
}

Expr pair_axis(const RopeSpec& spec, const Var& r) {
  if (!spec.axes.enabled()) return 0;
  const std::vector<int> axes = pair_axes(spec);
  // Clamped so that bounds inference knows the axis range.
  const Expr axis = cast<int>(constant_table(std::vector<double>(axes.begin(), axes.end()), "pair_axis_table")(r));
  return clamp(axis, 0, spec.axes.count() - 1);
}

}  // namespace ropegen::lowering
