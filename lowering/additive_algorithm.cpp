// Sinusoidal and learned absolute position encodings: out = x + PE[pos],
// over rows of x seen as (d, 1, s, b). Sinusoidal PE comes from RoPE's
// exact cos/sin (trig: accurate on every target) at the start of each
// position's block of 16, by angle addition; learned PE is a row of a
// run-time table.
#include <cmath>

#include "lowering/constant_table.h"
#include "lowering/cos_sin.h"
#include "lowering/positions.h"
#include "lowering/rope_algorithm.h"
#include "lowering/trig.h"
#include "ropegen/rope_math.h"

namespace ropegen::lowering::detail {

using namespace Halide;

namespace {

// Sinusoidal PE by angle addition from the start of each position's block
// of 16. Column c uses pair i's angle a = p f_i, p = p0 + k (p0 = p - p % 16):
//   sin a = sin(p0 f) cos(k f) + cos(p0 f) sin(k f)
//   cos a = cos(p0 f) cos(k f) - sin(p0 f) sin(k f)
// so PE(c, p) = u(c, p0) step_cos(c, k) + v(c, p0) step_sin(c, k), with
// (u, v) = (sin, cos)(p0 f) for a sin column, (cos, -sin)(p0 f) for a cos
// column: RoPE's exact fixed-point cos/sin once per block and column, and
// the steps from a table (float64 cos/sin rounded to float32: the same
// values on every target). Everything is in column order, so a row of PE
// is dense loads and multiply-adds, no gathers. Implicit positions of
// unpacked layouts compute (u, v) once per block (cos_sin_base, blocks
// counted from the offset's); ids and packed sequences per token: the same
// bits. At most ~3e-7 more error than an exact cos/sin per position.
constexpr int kBlockBits = 4, kBlock = 1 << kBlockBits;

Expr define_sinusoidal(const RopeSpec& spec, RopeAlgorithm& a) {
  const std::vector<double> freqs = sinusoidal_frequencies(spec);
  std::vector<int> pair(spec.dim), is_cos(spec.dim);
  for (int c = 0; c < spec.dim; ++c) std::tie(pair[c], is_cos[c]) = sinusoidal_column(spec, c);
  // Frequencies by column, not by pair: the angle reduction then reads
  // dense rows (indexed by pair, it gathered 4 words per column).
  std::vector<double> column_freqs(spec.dim);
  for (int c = 0; c < spec.dim; ++c) column_freqs[c] = freqs[pair[c]];
  std::vector<float> step(2 * kBlock * spec.dim);  // [k][cos(k f) of every column | sin(k f)]
  for (int k = 0; k < kBlock; ++k)
    for (int c = 0; c < spec.dim; ++c) {
      step[(2 * k) * spec.dim + c] = static_cast<float>(std::cos(k * column_freqs[c]));
      step[(2 * k + 1) * spec.dim + c] = static_cast<float>(std::sin(k * column_freqs[c]));
    }
  const Buffer<float> steps = constant_table_f32(step, "sinusoidal_step_table");
  const Buffer<double> cos_columns = constant_table(std::vector<double>(is_cos.begin(), is_cos.end()), "sinusoidal_cos_table");

  a.inv_freq = Func("inv_freq");
  a.inv_freq(a.r) = constant_table(column_freqs, "sinusoidal_inv_freq_table")(a.r);
  a.quarter_turns = Func("quarter_turns");
  a.quarter_turns(a.r) = quarter_turns_split(a.inv_freq(a.r));

  // Columns clamped so that bounds inference sees the tables' range.
  const Expr column = clamp(a.r, 0, spec.dim - 1);
  // (u, v) of a column at the position whose fixed-point reduction is `reduced`.
  auto u_v = [&](const Tuple& reduced) {
    const SinCos sc = sincos_of_reduced(reduced[0], reduced[1]);
    const Expr cos_column = cast<float>(cos_columns(column)) != 0.0f;
    return Tuple(select(cos_column, sc.cos, sc.sin), select(cos_column, -sc.sin, sc.cos));
  };
  const Expr id = a.position_id(0, a.s, a.b);
  const Expr in_block = id & cast(id.type(), kBlock - 1);
  a.reduced = Func("reduced");
  Tuple uv(std::vector<Expr>(2));
  if (a.cos_sin_shared_by_batch) {
    // Blocks relative to the offset's, so that an int32 indexes them at any offset.
    Var block("block");
    const Expr first_block = a.scalar(Arg::Offset) >> kBlockBits;
    a.reduced(a.r, block) = reduce_angle_fixed((first_block + block) * kBlock, a.quarter_turns(column));
    a.cos_sin_base = Func("cos_sin_base");
    a.cos_sin_base(a.r, block) = u_v(a.reduced(a.r, block));
    uv = a.cos_sin_base(a.r, cast<int>((id >> kBlockBits) - first_block));
  } else {
    a.reduced(a.r, a.s, a.b) = reduce_angle_fixed(id - in_block, a.quarter_turns(column));
    uv = u_v(a.reduced(a.r, a.s, a.b));
  }
  const Expr k = cast<int>(in_block);
  const Expr step_cos = steps((2 * k) * spec.dim + column);
  const Expr step_sin = steps((2 * k + 1) * spec.dim + column);
  a.cos_sin = Func("pe");
  a.cos_sin(a.r, a.s, a.b) = strict_float(uv[0] * step_cos + uv[1] * step_sin);
  // Implicit positions are the same in every batch: one row serves all.
  const Expr pe = a.cos_sin(a.d, a.s, spec.positions == PositionsMode::Explicit ? Expr(a.b) : Expr(0));
  if (!a.cos_sin_base.defined()) return pe;
  // With more than one sequence the rows come from pe_rows, a stage that a
  // schedule can compute once per tile for the whole batch; one sequence
  // adds PE where it is computed. The same values either way: a schedule
  // that specializes on batch_shares_pe_rows keeps one source per case (a
  // Func has one place), and one that does not reads select(c, v, v) = v.
  a.pe_rows = Func("pe_rows");
  a.pe_rows(a.r, a.s) = a.cos_sin(a.r, a.s, 0);
  a.batch_shares_pe_rows = a.q.input.dim(3).extent() >= 2;
  return select(a.batch_shares_pe_rows, a.pe_rows(a.d, a.s), pe);
}

}  // namespace

RopeAlgorithm build_sinusoidal_or_learned(const RopeSpec& spec, const KernelVariant& variant) {
  RopeAlgorithm a;
  a.variant = variant;
  const Type type = storage_type(spec.dtype);
  a.q.input = a.make_input(Arg::Q, type, 4, true);
  a.use(Arg::Q);
  a.q.output = Func("out_x");
  // [S, B] in sbd, [S] shared: batch stride 0
  a.make_input(Arg::Positions, position_type(variant), 2).dim(0).set_stride(Expr());
  a.make_input(Arg::CuSeqlens, Int(32), 1);
  define_positions(spec, a, 0);

  Expr added;
  if (spec.encoding == Encoding::Sinusoidal) {
    added = define_sinusoidal(spec, a);
  } else {
    a.use(Arg::Table);
    const ImageParam& table = a.make_input(Arg::Table, type, 2);
    // Ids outside the table are refused before host calls (call/prepare_call).
    const Expr row = table_row(a.position_id(0, a.s, a.b), table);
    added = load_as_float(table(a.d, row), spec.dtype);
  }
  const Expr x = load_as_float(a.q.input(a.d, a.h, a.s, a.b), spec.dtype);
  a.q.output(a.d, a.h, a.s, a.b) = store_from_float(strict_float(x + added), spec.dtype);
  return a;
}

}  // namespace ropegen::lowering::detail
