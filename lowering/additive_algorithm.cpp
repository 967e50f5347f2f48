// Sinusoidal and learned absolute position encodings: out = x + PE[pos],
// over rows of x seen as (d, 1, s, b). Sinusoidal PE comes from the same
// cos/sin stages as RoPE (accurate on every target), one per pair of
// columns; learned PE is a row of a run-time table.
#include "rope_algorithm.h"

#include "ropegen/rope_math.h"
#include "constant_table.h"
#include "trig.h"

namespace ropegen::lowering::detail {

using namespace Halide;

namespace {

// The value of sinusoidal column d (rope_math's sinusoidal_column).
Expr sinusoidal_value(const RopeSpec& spec, const RopeAlgorithm& a) {
  const auto [column_pair, cos_flag] = sinusoidal_column(spec, Expr(a.d));
  // Clamped so that bounds inference sees the table's range, not a select's union.
  const Expr pair = clamp(column_pair, 0, (spec.dim + 1) / 2 - 1);
  const Expr is_cos = cos_flag == 1;
  // Implicit positions are the same in every batch: one table row serves all.
  const Expr b = spec.positions == PositionsMode::Explicit ? Expr(a.b) : Expr(0);
  const Tuple cs = a.cos_sin(pair, a.s, b);
  return select(is_cos, cs[0], cs[1]);
}

}  // namespace

RopeAlgorithm build_sinusoidal_or_learned(const RopeSpec& spec, const KernelVariant& variant) {
  RopeAlgorithm a;
  a.variant = variant;
  const Type type = storage_type(spec.dtype);
  a.q.input = ImageParam(type, 4, "x");
  a.q.output = Func("out_x");
  a.positions = ImageParam(position_type(variant), 2, "positions");
  a.positions.dim(0).set_stride(Expr());  // [S, B] in sbd, [S] shared: batch stride 0
  a.cu_seqlens = ImageParam(Int(32), 1, "cu_seqlens");
  define_positions(spec, a, 0);

  Expr added;
  if (spec.encoding == Encoding::Sinusoidal) {
    a.inv_freq = Func("inv_freq");
    a.inv_freq(a.r) = constant_table(sinusoidal_frequencies(spec), "sinusoidal_inv_freq_table")(a.r);
    // Integer positions: the fixed-point reduction, as RoPE's (float32
    // vectors at full width instead of float64 ones).
    a.quarter_turns = Func("quarter_turns");
    a.quarter_turns(a.r) = quarter_turns_split(a.inv_freq(a.r));
    define_cos_sin(a, 1.0f);
    added = sinusoidal_value(spec, a);
  } else {
    a.uses_table = true;
    a.table = ImageParam(type, 2, "table");
    // Ids outside the table are refused before host calls (call/prepare_call).
    const Expr row = table_row(a.position_id(0, a.s, a.b), a.table);
    added = load_as_float(a.table(a.d, row), spec.dtype);
  }
  const Expr x = load_as_float(a.q.input(a.d, a.h, a.s, a.b), spec.dtype);
  a.q.output(a.d, a.h, a.s, a.b) = store_from_float(strict_float(x + added), spec.dtype);
  return a;
}

}  // namespace ropegen::lowering::detail
