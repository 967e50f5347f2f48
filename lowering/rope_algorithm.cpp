#include "rope_algorithm.h"

#include <cmath>

#include "ropegen/rope_math.h"
#include "constant_table.h"
#include "exp.h"
#include "trig.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// Positions of (s, b) as float64: explicit ids, or offset + index (thd:
// restarting at every cu_seqlens start).
Expr position_expr(const RopeSpec& spec, RopeAlgorithm& a) {
  if (spec.positions == PositionsMode::Explicit) {
    a.uses_positions = true;
    return cast<double>(a.positions(a.s, a.b));
  }
  a.uses_offset = true;
  if (spec.layout != Layout::THD) return cast<double>(a.offset + a.s);
  a.uses_cu_seqlens = true;
  // The sequence of token s: how many starts cu[1 .. n-1] are <= s.
  RDom later_starts(1, a.cu_seqlens.dim(0).extent() - 2, "later_starts");
  Func sequence("sequence");
  sequence(a.s) = 0;
  sequence(a.s) += select(a.cu_seqlens(later_starts) <= a.s, 1, 0);
  const Expr start = a.cu_seqlens(clamp(sequence(a.s), 0, a.cu_seqlens.dim(0).extent() - 1));
  return cast<double>(a.offset + a.s - start);
}

// inv_freq(r) after scaling. Static specs fold rope_math's table in; the
// two schemes that depend on the run-time seq_len select or recompute it
// from the same formulas.
Expr inv_freq_expr(const RopeSpec& spec, RopeAlgorithm& a) {
  const Scaling& sc = spec.scaling;
  if (sc.type == ScalingType::LongRope && sc.policy == LongRopePolicy::PerCall) {
    const Buffer<double> short_f = constant_table(compute_frequencies(spec, sc.original_max_position).inv_freq, "short_inv_freq_table");
    const Buffer<double> long_f = constant_table(compute_frequencies(spec, sc.original_max_position + 1).inv_freq, "long_inv_freq_table");
    a.uses_seq_len = true;
    return select(a.seq_len > Expr(sc.original_max_position), long_f(a.r), short_f(a.r));
  }
  if (sc.type == ScalingType::Dynamic) {
    a.uses_seq_len = true;
    const Expr theta = dynamic_ntk_theta(spec, cast<double>(a.seq_len));
    return pow(theta, cast<double>(a.r) * Expr(-2.0 / spec.rotary_dim));
  }
  return constant_table(compute_frequencies(spec).inv_freq, "inv_freq_table")(a.r);
}

void define_rotation(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t, bool is_key) {
  const int off = spec.rotary_offset, half = spec.num_pairs();
  const bool interleaved = spec.pairing == Pairing::Interleaved;
  // Dims of pair r: (first, second) member.
  auto dim_of = [&](const Expr& r, const Expr& m) { return interleaved ? off + 2 * r + m : off + r + m * half; };
  const Expr x0 = load_as_float(t.input(dim_of(a.r, 0), a.h, a.s, a.b), spec.dtype);
  const Expr x1 = load_as_float(t.input(dim_of(a.r, 1), a.h, a.s, a.b), spec.dtype);
  const Expr c = a.cos_sin(a.r, a.s, a.b)[0], sn = a.cos_sin(a.r, a.s, a.b)[1];
  Expr value = select(a.m == 0, x0 * c - x1 * sn, x1 * c + x0 * sn);
  if (spec.xpos.enabled) value *= a.xpos_scale(a.r, a.s, a.b)[is_key ? 1 : 0];
  // No fused multiply-add: the same roundings on every target (trig.cpp).
  // Measured free on CPU (memory-bound: ratio to copy unchanged).
  t.rotated(a.r, a.m, a.h, a.s, a.b) = strict_float(value);

  // The view's dim 0 is the dense one: pairs when half-split, members when
  // interleaved (in the output pairing, which differs only for DeepSeek-V3).
  const Expr stored = store_from_float(t.rotated(a.r, a.m, a.h, a.s, a.b), spec.dtype);
  if (spec.output_pairing == Pairing::Interleaved) {
    t.output(a.m, a.r, a.h, a.s, a.b) = stored;
    t.output.output_buffer().dim(1).set_stride(2);
  } else {
    t.output(a.r, a.m, a.h, a.s, a.b) = stored;
    t.output.output_buffer().dim(1).set_stride(half);
  }
  const bool out_interleaved = spec.output_pairing == Pairing::Interleaved;
  // Pair and member dims are known whole (runtime/tensor_view.cpp's
  // rotary_view): member tests fold at compile time. Halide 21's Vulkan
  // backend miscompiled them as run-time booleans (m == 0 read as false).
  t.output.output_buffer().dim(0).set_bounds(0, out_interleaved ? 2 : half);
  t.output.output_buffer().dim(1).set_bounds(0, out_interleaved ? half : 2);
}

}  // namespace

RopeAlgorithm build_rope_algorithm(const RopeSpec& spec, const KernelVariant& variant) {
  RopeAlgorithm a;
  a.variant = variant;
  const Type type = storage_type(spec.dtype);
  a.q.input = ImageParam(type, 4, "q");
  a.q.rotated = Func("rotated_q");
  a.q.output = Func("out_q");
  a.positions = ImageParam(variant.position_type, 2, "positions");
  // Position ids may be strided ([S, B] in sbhd) or broadcast ([S] shared: batch stride 0).
  a.positions.dim(0).set_stride(Expr());
  a.cu_seqlens = ImageParam(Int(32), 1, "cu_seqlens");

  a.position = Func("position");
  a.position(a.s, a.b) = position_expr(spec, a);

  a.inv_freq = Func("inv_freq");
  a.inv_freq(a.r) = inv_freq_expr(spec, a);

  const RopeFrequencies freqs = compute_frequencies(spec);
  const float attention = static_cast<float>(freqs.attention_factor);
  a.reduced = Func("reduced");
  a.reduced(a.r, a.s, a.b) = reduce_angle(a.position(a.s, a.b) * a.inv_freq(a.r));
  const SinCos sc = sincos_of_reduced(a.reduced(a.r, a.s, a.b)[0], a.reduced(a.r, a.s, a.b)[1]);
  a.cos_sin = Func("cos_sin");
  a.cos_sin(a.r, a.s, a.b) = attention == 1.0f ? Tuple(sc.cos, sc.sin) : Tuple(sc.cos * attention, sc.sin * attention);

  if (spec.xpos.enabled) {
    a.uses_seq_len = true;
    std::vector<double> log_base;
    for (double base : freqs.xpos_base) log_base.push_back(std::log(base));
    const Buffer<double> logs = constant_table(log_base, "xpos_log_base_table");
    // p = (pos - floor(seq_len / 2)) / scale_base, as lucidrains centres it.
    // Multiplied by the reciprocal: float64 division need not be correctly
    // rounded on GPUs, multiplication is (the same bits on every target).
    const Expr power = (a.position(a.s, a.b) - cast<double>(a.seq_len / 2)) *
                       f64_constant(1.0 / spec.xpos.scale_base, "xpos_inverse_scale_base");
    a.xpos_scale = Func("xpos_scale");
    // Queries scale by s_r^p, keys by s_r^-p (lucidrains: its inverse).
    const Expr log_scale = power * logs(a.r);
    a.xpos_scale(a.r, a.s, a.b) = Tuple(exp_to_float(log_scale, "xpos_q"), exp_to_float(-log_scale, "xpos_k"));
  }

  define_rotation(spec, a, a.q, false);
  if (variant.with_k) {
    a.k.input = ImageParam(type, 4, "k");
    a.k.rotated = Func("rotated_k");
    a.k.output = Func("out_k");
    define_rotation(spec, a, a.k, true);
  }
  return a;
}

std::vector<Argument> RopeAlgorithm::arguments() const {
  // Fixed order (documented in manifest.json): q, k, positions, cu_seqlens, offset, seq_len.
  std::vector<Argument> args = {q.input};
  if (variant.with_k) args.push_back(k.input);
  if (uses_positions) args.push_back(positions);
  if (uses_cu_seqlens) args.push_back(cu_seqlens);
  if (uses_offset) args.push_back(offset);
  if (uses_seq_len) args.push_back(seq_len);
  return args;
}

PassThroughCopy build_pass_through_copy(const RopeSpec& spec) {
  PassThroughCopy c;
  c.input = ImageParam(storage_type(spec.dtype), 4, "pass_in");
  c.output = Func("pass_out");
  c.output(c.d, c.h, c.s, c.b) = c.input(c.d, c.h, c.s, c.b);
  return c;
}

std::vector<Func> RopeAlgorithm::outputs() const {
  if (variant.with_k) return {q.output, k.output};
  return {q.output};
}

}  // namespace ropegen::lowering
