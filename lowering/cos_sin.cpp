#include "lowering/cos_sin.h"

#include <cmath>

#include "lowering/constant_table.h"
#include "lowering/exp.h"
#include "lowering/rope_algorithm.h"
#include "lowering/trig.h"

namespace ropegen::lowering {

using namespace Halide;

namespace {

// inv_freq(r) after scaling. Static specs fold rope_math's table in; the
// two schemes that depend on the run-time seq_len select or recompute it
// from the same formulas; run-time frequencies are read from their tensor.
Expr inv_freq_expr(const RopeSpec& spec, RopeAlgorithm& a) {
  const Scaling& sc = spec.scaling;
  if (spec.frequency.scheme == FrequencyScheme::Runtime) {
    a.use(Arg::Freqs);
    // Clamped: GPU schedules compute the table over a padded range.
    return cast<double>(a.input(Arg::Freqs)(min(a.r, spec.num_pairs() - 1)));
  }
  if (sc.type == ScalingType::LongRope && sc.policy == LongRopePolicy::PerCall) {
    // One table, the short factors' frequencies then the long ones', each
    // padded to whole rows, picked by an int32 row index. Not a select on
    // `seq_len > original_max_position`: Halide lifts that bool out of the
    // GPU kernel as an argument, and Halide 21's Vulkan backend writes a
    // bool argument's 1 byte and reads 4 (lavapipe chose the long factors
    // when the next bytes were not zero).
    std::vector<double> both = compute_frequencies(spec, sc.original_max_position).inv_freq;
    const int row = (spec.num_pairs() + kTableRowEntries - 1) / kTableRowEntries * kTableRowEntries;
    both.resize(row, 0.0);
    for (double f : compute_frequencies(spec, sc.original_max_position + 1).inv_freq) both.push_back(f);
    const Buffer<double> table = constant_table(both, "longrope_inv_freq_table");
    a.use(Arg::SeqLen);
    const Expr long_row =
        cast<int>(clamp(a.scalar(Arg::SeqLen) - Expr(static_cast<int64_t>(sc.original_max_position)), 0, 1));
    return table(a.r + long_row * row);
  }
  if (sc.type == ScalingType::Dynamic) {
    a.use(Arg::SeqLen);
    const Expr theta = dynamic_ntk_theta(spec, cast<double>(a.scalar(Arg::SeqLen)));
    return pow(theta, cast<double>(a.r) * Expr(-2.0 / spec.rotary_dim));
  }
  return constant_table(compute_frequencies(spec).inv_freq, "inv_freq_table")(a.r);
}

}  // namespace

std::pair<Func, Func> cos_sin_stages(const RopeAlgorithm& a, float attention, const std::string& prefix) {
  Func reduced(prefix + "reduced"), cos_sin(prefix + "cos_sin");
  reduced(a.r, a.s, a.b) = a.position_id.defined()
                               ? reduce_angle_fixed(a.position_id(a.r, a.s, a.b), a.quarter_turns(a.r))
                               : reduce_angle(a.position(a.r, a.s, a.b) * a.inv_freq(a.r), prefix);
  const SinCos sc = sincos_of_reduced(reduced(a.r, a.s, a.b)[0], reduced(a.r, a.s, a.b)[1]);
  cos_sin(a.r, a.s, a.b) = attention == 1.0f ? Tuple(sc.cos, sc.sin) : Tuple(sc.cos * attention, sc.sin * attention);
  return {reduced, cos_sin};
}

void define_cos_sin(RopeAlgorithm& a, float attention) {
  std::tie(a.reduced, a.cos_sin) = cos_sin_stages(a, attention, "");
}

Expr table_row(const Expr& id, const ImageParam& table) {
  return cast<int>(clamp(id, cast(id.type(), table.dim(1).min()), cast(id.type(), table.dim(1).max())));
}

// Frequency scheme table: cos and sin of pair r read from the call's cache,
// columns r and r + rotary_dim/2 of the row at the token's position (its
// axis's, multi-axis). The schedules place this stage where they place the
// computed cos/sin (once per token and pair, shared by every head of q and
// k), or inline where a row is one dense load (targets/cpu_schedule.cpp).
// The cache holds cos and sin as used (attention factor included), and the
// rotation is the same float32 arithmetic as with computed ones.
Func cos_sin_from_cache(const RopeSpec& spec, RopeAlgorithm& a, const std::string& name) {
  a.use(Arg::CosSinCache);
  const ImageParam& cache = a.input(Arg::CosSinCache);
  // Positions past the cache are refused before host calls (call/prepare_call).
  const Expr row = table_row(a.position_id(a.r, a.s, a.b), cache);
  Func cos_sin(name);
  cos_sin(a.r, a.s, a.b) = Tuple(cache(a.r, row), cache(a.r + spec.num_pairs(), row));
  return cos_sin;
}

Func xpos_stage(const RopeSpec& spec, const RopeAlgorithm& a, const RopeFrequencies& freqs, const std::string& prefix) {
  std::vector<double> log_base;
  for (double base : freqs.xpos_base) log_base.push_back(std::log(base));
  const Buffer<double> logs = constant_table(log_base, prefix + "xpos_log_base_table");
  // p = (pos - floor(seq_len / 2)) / scale_base, as lucidrains centres it.
  // Multiplied by the reciprocal: float64 division need not be correctly
  // rounded on GPUs, multiplication is (the same bits on every target).
  const Expr power = (a.position(a.r, a.s, a.b) - cast<double>(a.scalar(Arg::SeqLen) / 2)) *
                     f64_constant(1.0 / spec.xpos.scale_base, prefix + "xpos_inverse_scale_base");
  Func scale(prefix + "xpos_scale");
  // Queries scale by s_r^p, keys by s_r^-p (lucidrains: its inverse).
  const Expr log_scale = power * logs(a.r);
  scale(a.r, a.s, a.b) = Tuple(exp_to_float(log_scale, prefix + "xpos_q"), exp_to_float(-log_scale, prefix + "xpos_k"));
  return scale;
}

CosSinStages own_cos_sin_stages(const RopeSpec& spec, RopeAlgorithm& a, const RopeFrequencies& freqs,
                                const std::string& prefix) {
  CosSinStages own;
  if (spec.frequency.scheme == FrequencyScheme::Table) own.cos_sin = cos_sin_from_cache(spec, a, prefix + "cos_sin");
  else std::tie(own.reduced, own.cos_sin) = cos_sin_stages(a, static_cast<float>(freqs.attention_factor), prefix);
  if (spec.xpos.enabled) own.xpos_scale = xpos_stage(spec, a, freqs, prefix);
  return own;
}

void define_frequencies_and_cos_sin(const RopeSpec& spec, RopeAlgorithm& a, const RopeFrequencies& freqs) {
  if (spec.frequency.scheme == FrequencyScheme::Table) {
    a.cos_sin = cos_sin_from_cache(spec, a, "cos_sin");
  } else {
    a.inv_freq = Func("inv_freq");
    a.inv_freq(a.r) = inv_freq_expr(spec, a);
    a.quarter_turns = Func("quarter_turns");
    a.quarter_turns(a.r) = quarter_turns_split(a.inv_freq(a.r));
    define_cos_sin(a, static_cast<float>(freqs.attention_factor));
  }
  if (spec.xpos.enabled) {
    a.use(Arg::SeqLen);
    a.xpos_scale = xpos_stage(spec, a, freqs, "");
  }
}

}  // namespace ropegen::lowering
