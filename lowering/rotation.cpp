#include "lowering/rotation.h"

#include "abi/kernel_abi.h"
#include "lowering/fma.h"
#include "lowering/fp8.h"
#include "lowering/rope_algorithm.h"
#include "lowering/storage.h"

namespace ropegen::lowering {

using namespace Halide;

Expr dim_of(const RopeSpec& spec, Pairing pairing, const Expr& r, const Expr& m) {
  const int off = spec.rotary_offset;
  return pairing == Pairing::Interleaved ? off + 2 * r + m : off + r + m * spec.num_pairs();
}

void define_rotation(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t, bool is_key, bool with_output,
                     Func cos_sin, Func xpos_scale) {
  if (!cos_sin.defined()) cos_sin = a.cos_sin, xpos_scale = a.xpos_scale;
  // qk_norm: the normalised values (float32, not rounded to the dtype).
  auto x = [&](const Expr& dim) {
    return t.normed.defined() ? t.normed(dim, a.h, a.s, a.b) : load_as_float(t.input(dim, a.h, a.s, a.b), spec.dtype);
  };
  const Expr x0 = x(dim_of(spec, spec.pairing, a.r, 0));
  const Expr x1 = x(dim_of(spec, spec.pairing, a.r, 1));
  const Expr b = a.cos_sin_shared_by_batch ? Expr(0) : Expr(a.b);
  const Expr c = cos_sin(a.r, a.s, b)[0];
  const Expr sn = a.variant.backward ? -cos_sin(a.r, a.s, b)[1] : cos_sin(a.r, a.s, b)[1];
  // x0 c - x1 s and x1 c + x0 s: one product rounded, the other fused with
  // the sum (fma.h: the same bits on every target, the instruction where
  // there is one). The negation flips the sign bit, as on every target.
  const Expr x1_sn = strict_float(x1 * sn);
  const Expr minus_x1_sn = reinterpret<float>(reinterpret<uint32_t>(x1_sn) ^ Expr(0x80000000u));
  Expr value =
      select(a.m == 0, fused_multiply_add(x0, c, minus_x1_sn), fused_multiply_add(x1, c, strict_float(x0 * sn)));
  if (spec.xpos.enabled) value *= xpos_scale(a.r, a.s, b)[is_key ? 1 : 0];
  t.rotated(a.r, a.m, a.h, a.s, a.b) = strict_float(value);
  if (!with_output) return;  // kv_cache specs without out_k: k only goes to the cache

  // The view's dims (abi::rotary_view): dim 0 is the dense one, pairs when
  // half-split, members when interleaved (in the output pairing, which
  // differs only for DeepSeek-V3).
  const Expr stored =
      store_from_float(t.rotated(a.r, a.m, a.h, a.s, a.b), spec.dtype, Bf16Rounding::InstructionWhereAvailable);
  const abi::RotaryView view = abi::rotary_view(spec.output_pairing, spec.rotary_dim);
  if (view.pairs_first)
    t.output(a.r, a.m, a.h, a.s, a.b) = stored;
  else
    t.output(a.m, a.r, a.h, a.s, a.b) = stored;
  t.output.output_buffer().dim(1).set_stride(view.stride1);
  // Pair and member dims are known whole (call/parts' rotary_view): member
  // tests fold at compile time. Halide 21's Vulkan backend miscompiled them
  // as run-time booleans (m == 0 read as false).
  t.output.output_buffer().dim(0).set_bounds(0, view.extent0);
  t.output.output_buffer().dim(1).set_bounds(0, view.extent1);
}

Expr whole_row(const RopeSpec& spec, const RopeAlgorithm& a, const RotatedTensor& t, const Expr& outside,
               const Expr& h) {
  const Var& d = a.d;
  const int off = spec.rotary_offset, half = spec.num_pairs();
  // Pair and member of dim d in the output pairing, clamped into the rotary
  // range (a dim outside it selects `outside`, but Halide still bounds the
  // loads); likely(): the loop over the row is partitioned so that inside
  // the range there is no clamp. r and m are written so that rotated's
  // storage (half: (r, m); interleaved: (m, r), a schedule's choice)
  // flattens back to the dense index j.
  const Expr j = clamp(likely(d - off), 0, spec.rotary_dim - 1);
  Expr r, m;
  if (spec.output_pairing == Pairing::Interleaved) r = j / 2, m = j % 2;
  else r = j % half, m = j / half;
  const Expr in_range = d >= off && d < off + spec.rotary_dim;
  return select(in_range, t.rotated(r, m, h, a.s, a.b), outside);
}

namespace {

// The scale of group g of `values` (d, h, s, b), as vLLM's
// fused_inv_rope_fp8_quant: max(absmax, 1e-10) times float32(1 / the
// format's max), for ue8m0 rounded up to a power of two by its bits (exact
// on every target, where log2 / exp2 are not).
Expr group_scale(const RopeSpec& spec, const Func& values, const Expr& g, const Expr& h, const Expr& s, const Expr& b) {
  const int group = spec.output_quant.group;
  RDom r(0, group, "group_dims");
  const Expr absmax = max(maximum(abs(values(g * group + r, h, s, b))), 1e-10f);
  const float inverse_max = 1.0f / fp8_largest(spec.output_dtype);
  Expr scale = strict_float(absmax * inverse_max);
  if (spec.output_quant.scale == QuantScale::Ue8m0) {
    const Expr bits = reinterpret<uint32_t>(scale);
    const Expr power_of_two = (bits & Expr(0x7fffffu)) == Expr(0u);
    scale = select(power_of_two, scale, reinterpret<float>((bits & Expr(0x7f800000u)) + Expr(0x800000u)));
  }
  return scale;
}

// output_quant: q's codes with a scale per group of dims, and the scales.
void define_group_quant(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, const Expr& value) {
  const Var &d = a.d, &h = a.h, &s = a.s, &b = a.b;
  t.row_values = Func("out_q_row_values");
  t.row_values(d, h, s, b) = value;
  t.group_scales = Func("out_q_group_scales");
  t.group_scales(d, h, s, b) = group_scale(spec, t.row_values, d, h, s, b);  // d: the group
  t.output(d, h, s, b) =
      fp8_from_float(t.row_values(d, h, s, b), t.group_scales(d / spec.output_quant.group, h, s, b), spec.output_dtype);
  // out_scales: the same rows from a rotation of its own (an output is a
  // loop nest of its own), the same arithmetic, so the same scales.
  RotatedTensor own;
  own.input = t.input;
  own.rotated = t.scales_rotated = Func("out_scales_rotated");
  define_rotation(spec, a, own, false, false, a.output_scales.cos_sin, a.output_scales.xpos_scale);
  Func values("out_scales_row_values");
  values(d, h, s, b) = whole_row(spec, a, own, load_as_float(t.input(d, h, s, b), spec.dtype), h);
  t.out_scales = Func("out_scales");
  t.out_scales(d, h, s, b) = group_scale(spec, values, d, h, s, b);
  t.out_scales.output_buffer().dim(0).set_bounds(0, spec.head_dim / spec.output_quant.group);
}

}  // namespace

void define_whole_row_output(const RopeSpec& spec, RopeAlgorithm& a, RotatedTensor& t, bool is_key) {
  const Expr outside =
      t.normed.defined() ? t.normed(a.d, a.h, a.s, a.b) : load_as_float(t.input(a.d, a.h, a.s, a.b), spec.dtype);
  const Expr value = whole_row(spec, a, t, outside, a.h);
  if (spec.output_quant.enabled && !is_key) {
    define_group_quant(spec, a, t, value);
  } else if (spec.has_fp8_output()) {
    const Arg scale = is_key ? Arg::KScale : Arg::QScale;
    a.use(scale);
    t.output(a.d, a.h, a.s, a.b) = fp8_from_float(value, a.scalar(scale), spec.output_dtype, spec.fp8_scale);
  } else {
    t.output(a.d, a.h, a.s, a.b) = store_from_float(value, spec.dtype, Bf16Rounding::InstructionWhereAvailable);
  }
  // The head dim is known whole: the call passes whole rows.
  t.output.output_buffer().dim(0).set_bounds(0, spec.head_dim);
}

}  // namespace ropegen::lowering
