#include "lowering/rope_algorithm.h"

#include "abi/kernel_abi.h"
#include "lowering/cos_sin.h"
#include "lowering/positions.h"
#include "lowering/qk_norm.h"
#include "lowering/rotation.h"
#include "ropegen/rope_math.h"

namespace ropegen::lowering {

using namespace Halide;

RopeSpec kernel_spec(const RopeSpec& spec, const KernelVariant& variant) {
  RopeSpec s = spec;
  const abi::KernelPairing p = abi::kernel_pairing(spec.pairing, spec.output_pairing, variant.backward);
  s.pairing = p.read, s.output_pairing = p.write;
  return s;
}

Layout kernel_layout(const RopeSpec& spec) {
  return abi::layout_traits(abi::tensor_layout(spec.encoding, spec.layout)).with_heads;
}

RopeAlgorithm::RopeAlgorithm() {
  for (int i = abi::kTensorArgCount; i < abi::kArgCount; ++i) {
    const abi::ArgumentInfo& a = abi::kArguments[i];
    const bool int64 = a.kind == abi::ArgKind::Int64;
    scalars.emplace_back(int64 ? Int(64) : Float(32), a.name);
  }
  abi::Scalars defaults;  // offset 0, seq_len 1, scales 1, pool_threads 1
  for (int i = abi::kTensorArgCount; i < abi::kArgCount; ++i) {
    const Arg a = static_cast<Arg>(i);
    if (abi::info(a).kind == abi::ArgKind::Int64)
      scalar(a).set(defaults[a].i64);
    else
      scalar(a).set(defaults[a].f32);
  }
}

ImageParam& RopeAlgorithm::make_input(Arg a, const Type& type, int dims, bool single_tensor) {
  const abi::ArgumentInfo& row = abi::info(a);
  return inputs[a] =
             ImageParam(type, dims, single_tensor && row.kernel_single_name ? row.kernel_single_name : row.name);
}

namespace {

RopeAlgorithm build_rope(const RopeSpec& forward_spec, const KernelVariant& variant, bool own_cache_stages) {
  const RopeSpec spec = kernel_spec(forward_spec, variant);
  RopeAlgorithm a;
  a.variant = variant;
  const Type type = storage_type(spec.dtype);
  a.q.input = a.make_input(Arg::Q, type, 4);
  a.use(Arg::Q);
  a.q.rotated = Func("rotated_q");
  a.q.output = Func("out_q");
  // Position ids may be strided ([S, B] in sbhd) or broadcast ([S] shared: batch stride 0).
  a.make_input(Arg::Positions, position_type(variant), spec.axes.enabled() ? 3 : 2).dim(0).set_stride(Expr());
  a.make_input(Arg::CuSeqlens, Int(32), 1);
  a.make_input(Arg::Freqs, Float(32), 1);
  a.make_input(Arg::CosSinCache, Float(32), 2);

  define_positions(spec, a, pair_axis(spec, a.r));
  const RopeFrequencies freqs = compute_frequencies(spec);
  define_frequencies_and_cos_sin(spec, a, freqs);

  // qk_norm: the norm, then the rotation of the normed rows; its backward
  // rotates the upstream gradient back, then the norm's gradient.
  // With a weight, also the weight's gradient (its own cos/sin stages).
  const bool norm = spec.qk_norm.enabled;
  a.whole_rows = norm || spec.has_fp8_output();
  const bool weight_gradient = norm && variant.backward && spec.qk_norm.has_weight();
  if (weight_gradient) a.norm_gradient = own_cos_sin_stages(spec, a, freqs, "d_norm_");
  if (spec.output_quant.enabled) a.output_scales = own_cos_sin_stages(spec, a, freqs, "scales_");
  auto rotate = [&](RotatedTensor& t, bool is_key, Arg weight, Arg saved, Arg d_weight, bool with_output) {
    if (norm && !variant.backward) define_qk_norm(spec, a, t, weight);
    define_rotation(spec, a, t, is_key, with_output && !a.whole_rows);
    if (norm && variant.backward) define_qk_norm_backward(spec, a, t, weight, saved);
    else if (a.whole_rows && with_output) define_whole_row_output(spec, a, t, is_key);
    if (weight_gradient) define_norm_weight_gradient(spec, a, t, is_key, d_weight);
  };
  rotate(a.q, false, Arg::QNormWeight, Arg::SavedQ, Arg::DQNormWeight, true);
  if (variant.with_k || spec.kv_cache.enabled) {
    a.k.input = a.make_input(Arg::K, type, 4);
    a.use(Arg::K);
    a.k.rotated = Func("rotated_k");
    if (variant.with_k) a.k.output = Func("out_k");
    rotate(a.k, true, Arg::KNormWeight, Arg::SavedK, Arg::DKNormWeight, variant.with_k);
  }
  if (spec.kv_cache.enabled) define_kv_append(spec, a, own_cache_stages);
  if (variant.backward && a.uses(Arg::Freqs)) define_frequency_gradient(spec, a, freqs);
  return a;
}

}  // namespace

RopeAlgorithm build_algorithm(const RopeSpec& spec, const KernelVariant& variant, bool own_cache_stages) {
  switch (spec.encoding) {
    case Encoding::Rope: return build_rope(spec, variant, own_cache_stages);
    case Encoding::Sinusoidal:
    case Encoding::Learned: return detail::build_sinusoidal_or_learned(spec, variant);
    case Encoding::Alibi: return detail::build_alibi(spec, variant);
  }
  return {};
}

// The table's order (abi/arguments.h; manifest.json lists it): the tensor
// inputs, then the scalars (CPU schedules' pool_threads last), of those the
// kernel reads.
std::vector<Argument> RopeAlgorithm::arguments() const {
  std::vector<Argument> args;
  for (int i = 0; i < abi::kArgCount; ++i) {
    const Arg a = static_cast<Arg>(i);
    if (!uses(a) || abi::info(a).direction != abi::Direction::In) continue;
    if (abi::is_tensor(a))
      args.push_back(inputs[a]);
    else
      args.push_back(scalar(a));
  }
  return args;
}

// out_q (, out_k) (, k_cache (, v_cache)) (, d_freqs) (, d_q_norm_weight (,
// d_k_norm_weight)) (, out_scales): the table's order of outputs.
std::vector<Func> RopeAlgorithm::outputs() const {
  std::vector<Func> out = {q.output};
  if (variant.with_k) out.push_back(k.output);
  for (const Func& f :
       {kv.k_cache, kv.v_cache, gradient.d_freqs, q.weight_gradient.d_weight, k.weight_gradient.d_weight, q.out_scales})
    if (f.defined()) out.push_back(f);
  return out;
}

PassThroughCopy build_pass_through_copy(const RopeSpec& spec) {
  PassThroughCopy c;
  c.input = ImageParam(storage_type(spec.dtype), 4, "pass_in");
  c.output = Func("pass_out");
  c.output(c.d, c.h, c.s, c.b) = c.input(c.d, c.h, c.s, c.b);
  return c;
}

}  // namespace ropegen::lowering
