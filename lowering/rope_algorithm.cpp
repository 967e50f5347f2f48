#include "rope_algorithm.h"

#include <cmath>

#include "call/contract.h"
#include "call/layout_traits.h"
#include "ropegen/rope_math.h"
#include "constant_table.h"
#include "exp.h"
#include "fma.h"
#include "fp8.h"
#include "trig.h"

namespace ropegen::lowering {

using namespace Halide;

RopeSpec kernel_spec(const RopeSpec& spec, const KernelVariant& variant) {
  if (!variant.backward) return spec;
  RopeSpec s = spec;
  std::swap(s.pairing, s.output_pairing);
  return s;
}

Layout kernel_layout(const RopeSpec& spec) {
  return call::layout_traits(call::tensor_layout(call::call_contract(spec))).with_heads;
}

namespace detail {

namespace {
// The position as float64 and as an integer (int32 ids stay int32).
std::pair<Expr, Expr> position_exprs(const RopeSpec& spec, RopeAlgorithm& a, const Expr& axis) {
  Expr id;
  if (spec.positions == PositionsMode::Explicit) {
    a.uses_positions = true;
    id = spec.axes.enabled() ? a.positions(axis, a.s, a.b) : a.positions(a.s, a.b);
  } else {
    a.uses_offset = true;
    id = a.offset + a.s;
  }
  if (spec.positions == PositionsMode::Implicit && call::layout_traits(spec.layout).packed()) {
    a.uses_cu_seqlens = true;
    // The sequence of token s: how many starts cu[1 .. n-1] are <= s.
    RDom later_starts(1, a.cu_seqlens.dim(0).extent() - 2, "later_starts");
    Func sequence("sequence");
    sequence(a.s) = 0;
    sequence(a.s) += select(a.cu_seqlens(later_starts) <= a.s, 1, 0);
    id -= a.cu_seqlens(clamp(sequence(a.s), 0, a.cu_seqlens.dim(0).extent() - 1));
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
  a.cos_sin_shared_by_batch = a.uses_offset && !a.uses_cu_seqlens;  // offset + s in every sequence
}

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

}  // namespace detail

namespace {

// inv_freq(r) after scaling. Static specs fold rope_math's table in; the
// two schemes that depend on the run-time seq_len select or recompute it
// from the same formulas; run-time frequencies are read from their tensor.
Expr inv_freq_expr(const RopeSpec& spec, RopeAlgorithm& a) {
  const Scaling& sc = spec.scaling;
  if (spec.frequency.scheme == FrequencyScheme::Runtime) {
    a.uses_freqs = true;
    // Clamped: GPU schedules compute the table over a padded range.
    return cast<double>(a.freqs(min(a.r, spec.num_pairs() - 1)));
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
    a.uses_seq_len = true;
    const Expr long_row = cast<int>(clamp(a.seq_len - Expr(static_cast<int64_t>(sc.original_max_position)), 0, 1));
    return table(a.r + long_row * row);
  }
  if (sc.type == ScalingType::Dynamic) {
    a.uses_seq_len = true;
    const Expr theta = dynamic_ntk_theta(spec, cast<double>(a.seq_len));
    return pow(theta, cast<double>(a.r) * Expr(-2.0 / spec.rotary_dim));
  }
  return constant_table(compute_frequencies(spec).inv_freq, "inv_freq_table")(a.r);
}

// Frequency scheme table: cos and sin of pair r read from the call's cache,
// columns r and r + rotary_dim/2 of the row at the token's position (its
// axis's, multi-axis). The schedules place this stage where they place the
// computed cos/sin (once per token and pair, shared by every head of q and
// k), or inline where a row is one dense load (targets/cpu_schedule.cpp).
// The cache holds cos and sin as used (attention factor included), and the
// rotation is the same float32 arithmetic as with computed ones.
Func cos_sin_from_cache(const RopeSpec& spec, RopeAlgorithm& a, const std::string& name) {
  a.uses_cos_sin_cache = true;
  const ImageParam& cache = a.cos_sin_cache;
  // Positions past the cache are refused before host calls (call/prepare_call).
  const Expr row = detail::table_row(a.position_id(a.r, a.s, a.b), cache);
  Func cos_sin(name);
  cos_sin(a.r, a.s, a.b) = Tuple(cache(a.r, row), cache(a.r + spec.num_pairs(), row));
  return cos_sin;
}

// Multi-axis specs read the position of each pair's axis (rope_math's pair_axes).
Expr pair_axis(const RopeSpec& spec, const Var& r) {
  if (!spec.axes.enabled()) return 0;
  const std::vector<int> axes = pair_axes(spec);
  // Clamped so that bounds inference knows the axis range.
  const Expr axis = cast<int>(constant_table(std::vector<double>(axes.begin(), axes.end()), "pair_axis_table")(r));
  return clamp(axis, 0, spec.axes.count() - 1);
}

// xPos scales (r, s, b) -> {query s_r^p, key s_r^-p}; `prefix` keeps the
// names of a second copy unique.
Func xpos_stage(const RopeSpec& spec, const RopeAlgorithm& a, const RopeFrequencies& freqs, const std::string& prefix) {
  std::vector<double> log_base;
  for (double base : freqs.xpos_base) log_base.push_back(std::log(base));
  const Buffer<double> logs = constant_table(log_base, prefix + "xpos_log_base_table");
  // p = (pos - floor(seq_len / 2)) / scale_base, as lucidrains centres it.
  // Multiplied by the reciprocal: float64 division need not be correctly
  // rounded on GPUs, multiplication is (the same bits on every target).
  const Expr power = (a.position(a.r, a.s, a.b) - cast<double>(a.seq_len / 2)) *
                     f64_constant(1.0 / spec.xpos.scale_base, prefix + "xpos_inverse_scale_base");
  Func scale(prefix + "xpos_scale");
  // Queries scale by s_r^p, keys by s_r^-p (lucidrains: its inverse).
  const Expr log_scale = power * logs(a.r);
  scale(a.r, a.s, a.b) = Tuple(exp_to_float(log_scale, prefix + "xpos_q"), exp_to_float(-log_scale, prefix + "xpos_k"));
  return scale;
}

// Dim of member m of pair r in a pairing.
Expr dim_of(const RopeSpec& spec, Pairing pairing, const Expr& r, const Expr& m) {
  const int off = spec.rotary_offset;
  return pairing == Pairing::Interleaved ? off + 2 * r + m : off + r + m * spec.num_pairs();
}

// `spec` is the kernel's (kernel_spec): it reads in `pairing` and writes in
// `output_pairing`; backward kernels rotate by -angle.
// cos_sin and xpos_scale: a's, unless given (the KV-cache rows' own copies).
void define_rotation(const RopeSpec& spec, const RopeAlgorithm& a, RotatedTensor& t, bool is_key, bool with_output = true,
                     Func cos_sin = Func(), Func xpos_scale = Func()) {
  if (!cos_sin.defined()) cos_sin = a.cos_sin, xpos_scale = a.xpos_scale;
  const int half = spec.num_pairs();
  const Expr x0 = load_as_float(t.input(dim_of(spec, spec.pairing, a.r, 0), a.h, a.s, a.b), spec.dtype);
  const Expr x1 = load_as_float(t.input(dim_of(spec, spec.pairing, a.r, 1), a.h, a.s, a.b), spec.dtype);
  const Expr b = a.cos_sin_shared_by_batch ? Expr(0) : Expr(a.b);
  const Expr c = cos_sin(a.r, a.s, b)[0];
  const Expr sn = a.variant.backward ? -cos_sin(a.r, a.s, b)[1] : cos_sin(a.r, a.s, b)[1];
  // x0 c - x1 s and x1 c + x0 s: one product rounded, the other fused with
  // the sum (fma.h: the same bits on every target, the instruction where
  // there is one). The negation flips the sign bit, as on every target.
  const Expr x1_sn = strict_float(x1 * sn);
  const Expr minus_x1_sn = reinterpret<float>(reinterpret<uint32_t>(x1_sn) ^ Expr(0x80000000u));
  Expr value = select(a.m == 0, fused_multiply_add(x0, c, minus_x1_sn), fused_multiply_add(x1, c, strict_float(x0 * sn)));
  if (spec.xpos.enabled) value *= xpos_scale(a.r, a.s, b)[is_key ? 1 : 0];
  t.rotated(a.r, a.m, a.h, a.s, a.b) = strict_float(value);
  if (!with_output) return;  // kv_cache specs without out_k: k only goes to the cache

  // The view's dim 0 is the dense one: pairs when half-split, members when
  // interleaved (in the output pairing, which differs only for DeepSeek-V3).
  const Expr stored =
      store_from_float(t.rotated(a.r, a.m, a.h, a.s, a.b), spec.dtype, Bf16Rounding::InstructionWhereAvailable);
  const bool out_interleaved = spec.output_pairing == Pairing::Interleaved;
  if (out_interleaved) {
    t.output(a.m, a.r, a.h, a.s, a.b) = stored;
    t.output.output_buffer().dim(1).set_stride(2);
  } else {
    t.output(a.r, a.m, a.h, a.s, a.b) = stored;
    t.output.output_buffer().dim(1).set_stride(half);
  }
  // Pair and member dims are known whole (runtime/tensor_view.cpp's
  // rotary_view): member tests fold at compile time. Halide 21's Vulkan
  // backend miscompiled them as run-time booleans (m == 0 read as false).
  t.output.output_buffer().dim(0).set_bounds(0, out_interleaved ? 2 : half);
  t.output.output_buffer().dim(1).set_bounds(0, out_interleaved ? half : 2);
}

// The term of dL/d(inv_freq) that pair r of row (h, s, b) of one tensor
// adds: its position times dL/dangle. With y the forward rotation of the
// saved input pair and g the upstream gradient, dL/dangle = g1*y0 - g0*y1
// (times the xPos scale). The saved input sits where the forward read it
// (the kernel spec's output pairing), g where the forward wrote.
Expr frequency_gradient(const RopeSpec& spec, const RopeAlgorithm& a, const RotatedTensor& t, bool is_key,
                        const Expr& h, const Expr& s, const Expr& b) {
  auto load = [&](const ImageParam& in, Pairing pairing, int m) {
    return load_as_float(in(dim_of(spec, pairing, a.r, m), h, s, b), spec.dtype);
  };
  const Expr x0 = load(t.saved, spec.output_pairing, 0), x1 = load(t.saved, spec.output_pairing, 1);
  const Expr g0 = load(t.input, spec.pairing, 0), g1 = load(t.input, spec.pairing, 1);
  const Expr c = a.d_freqs_cos_sin(a.r, s, b)[0], sn = a.d_freqs_cos_sin(a.r, s, b)[1];
  Expr d_angle = g1 * (x0 * c - x1 * sn) - g0 * (x1 * c + x0 * sn);
  if (spec.xpos.enabled) d_angle *= a.d_freqs_xpos_scale(a.r, s, b)[is_key ? 1 : 0];
  return a.position(a.r, s, b) * cast<double>(strict_float(d_angle));
}

// dL/d(inv_freq) as RopeAlgorithm::d_freqs_levels lays it out: one
// order of float64 additions, whatever the target or its threads.
void define_frequency_gradient(const RopeSpec& spec, RopeAlgorithm& a, const RopeFrequencies& freqs) {
  const Type type = storage_type(spec.dtype);
  std::tie(a.d_freqs_reduced, a.d_freqs_cos_sin) =
      detail::cos_sin_stages(a, static_cast<float>(freqs.attention_factor), "d_freqs_");
  if (spec.xpos.enabled) a.d_freqs_xpos_scale = xpos_stage(spec, a, freqs, "d_freqs_");
  auto zero = [&](Func& f, const std::string& name, std::vector<Var> args) {
    f = Func(name);
    f(args) = cast<double>(0);
  };
  Func token;
  zero(token, "d_freqs_level0", {a.r, a.s, a.b});
  for (RotatedTensor* t : {&a.q, &a.k}) {
    if (!t->input.defined()) continue;
    t->saved = ImageParam(type, 4, t == &a.q ? "saved_q" : "saved_k");
    RDom heads(t->input.dim(1).min(), t->input.dim(1).extent(), t == &a.q ? "q_heads" : "k_heads");
    token(a.r, a.s, a.b) += frequency_gradient(spec, a, *t, t == &a.k, heads, a.s, a.b);
  }
  a.d_freqs_levels = {token};
  // k has q's tokens (call/prepare_call checks).
  const ImageParam& q = a.q.input;
  Expr first = q.dim(2).min(), entries = q.dim(2).extent();  // along s, per batch, of the level below
  for (int level = 1; level <= RopeAlgorithm::kGradientLevels; ++level) {
    Func sums;
    zero(sums, "d_freqs_level" + std::to_string(level), {a.r, a.s, a.b});
    RDom u(0, RopeAlgorithm::kGradientGroup, sums.name() + "_entries");
    // The last group stops at the level below's last entry.
    const Expr i = a.s * RopeAlgorithm::kGradientGroup + u;
    u.where(i < entries);
    sums(a.r, a.s, a.b) += a.d_freqs_levels.back()(a.r, first + i, a.b);
    a.d_freqs_levels.push_back(sums);
    first = 0;
    entries = (entries + RopeAlgorithm::kGradientGroup - 1) / RopeAlgorithm::kGradientGroup;
  }
  zero(a.d_freqs_sum, "d_freqs_sum", {a.r});
  RDom rest(0, entries, q.dim(3).min(), q.dim(3).extent(), "d_freqs_groups");
  a.d_freqs_sum(a.r) += a.d_freqs_levels.back()(a.r, rest.x, rest.y);
  a.d_freqs = Func("d_freqs");
  a.d_freqs(a.r) = cast<float>(a.d_freqs_sum(a.r));
}

// The cache's element for a float32 value: the cache dtype's rounding, or
// for fp8 caches the code of value / scale.
Type cache_type(const KvCache& kv) { return kv.is_fp8() ? UInt(8) : storage_type(kv.float_dtype()); }
Expr cache_value_from_float(const KvCache& kv, const Expr& value, const Expr& scale,
                            Bf16Rounding rounding = Bf16Rounding::IntegerOps) {
  return kv.is_fp8() ? fp8_from_float(value, scale, kv.dtype) : store_from_float(value, kv.float_dtype(), rounding);
}

// A row element of `in` (spec dtype) as the cache stores it: the same bits
// when the dtypes agree, else through float32 (round to nearest even).
Expr as_cache_value(const Expr& value, DType from, const KvCache& kv, const Expr& scale) {
  if (!kv.is_fp8() && kv.float_dtype() == from) return value;
  return cache_value_from_float(kv, load_as_float(value, from), scale);
}

// Where token t goes (FlashInfer's page.cuh append: page
// kv_indices[kv_indptr[b] + p / page_size], entry p % page_size; vLLM:
// slot slot_mapping[t]): a.kv_target(t) = {entry, page}, page -1 when it
// goes nowhere. prepare_call checks every index of a host call; a device
// call's cannot be read without a synchronisation, so whatever they are,
// every load is clamped into its buffer and a token whose target is not in
// the cache is not appended (README.md): a batch index outside the
// requests or a slot outside the cache (negative: vLLM's padding), a
// negative position or one past its request's pages, a page id outside the
// cache; tokens past the index tensor (GPU staging pads tokens) neither.
void define_kv_target(const RopeSpec& spec, RopeAlgorithm& a) {
  auto within = [](const Expr& i, const ImageParam& p) { return clamp(i, p.dim(0).min(), p.dim(0).max()); };
  auto inside = [](const Expr& i, const Expr& min, const Expr& max) { return min <= i && i <= max; };
  const Var& t = a.s;
  Expr entry, page, exists;
  if (spec.kv_cache.layout == KvLayout::Contiguous) {
    a.uses_slot_mapping = true;
    entry = a.k_cache.output_buffer().dim(2).min();
    page = a.slot_mapping(within(t, a.slot_mapping));
    exists = t <= a.slot_mapping.dim(0).max();
  } else {
    a.uses_page_table = true;
    const int ps = spec.kv_cache.page_size;
    const ImageParam& indptr = a.kv_indptr;
    const Expr b = a.batch_indices(within(t, a.batch_indices));
    // The token's place in its request (prepare_call: cache_positions, else its position).
    const Expr pos = a.cache_positions(within(t, a.cache_positions));
    // Request b's pages are kv_indices[kv_indptr[b] .. kv_indptr[b + 1]).
    const Expr request = within(b, indptr);
    const Expr index = indptr(request) + cast<int>(pos / ps);
    entry = cast<int>(pos % ps);
    page = a.kv_indices(within(index, a.kv_indices));
    exists = t <= a.batch_indices.dim(0).max() && inside(b, indptr.dim(0).min(), indptr.dim(0).max() - 1) &&
             pos >= 0 && index < indptr(within(request + 1, indptr)) &&
             inside(index, a.kv_indices.dim(0).min(), a.kv_indices.dim(0).max());
  }
  const OutputImageParam cache = a.k_cache.output_buffer();
  a.kv_target = Func("kv_target");
  a.kv_target(t) = Tuple(entry, select(exists && inside(page, cache.dim(3).min(), cache.dim(3).max()), page, -1));
}

// Token t's entry and page in `cache`, clamped (bounds inference sees the
// cache, whatever the indices), and whether it is appended.
struct CacheEntry {
  Expr entry, page, appended;
};
CacheEntry cache_entry(const RopeAlgorithm& a, const Expr& t, const Func& cache) {
  const OutputImageParam out = cache.output_buffer();
  const Expr entry = a.kv_target(t)[0], page = a.kv_target(t)[1];
  return {clamp(entry, out.dim(2).min(), out.dim(2).max()), clamp(page, out.dim(3).min(), out.dim(3).max()), page >= 0};
}

void define_kv_append(const RopeSpec& spec, RopeAlgorithm& a, bool own_cache_stages) {
  const KvCache& kv = spec.kv_cache;
  // fp8 caches read the call's scales (k's also for k's copied dims).
  a.uses_k_scale = kv.is_fp8();
  a.uses_v_scale = kv.is_fp8() && a.variant.with_v;
  const ImageParam& k = a.k.input;
  a.kv_indices = ImageParam(Int(32), 1, "kv_indices");
  a.kv_indptr = ImageParam(Int(32), 1, "kv_indptr");
  a.batch_indices = ImageParam(Int(32), 1, "batch_indices");
  a.slot_mapping = ImageParam(Int(32), 1, "slot_mapping");
  a.cache_positions = ImageParam(Int(32), 1, "cache_positions");
  for (const ImageParam& p : {a.kv_indices, a.kv_indptr, a.batch_indices, a.slot_mapping, a.cache_positions})
    p.dim(0).set_stride(Expr());

  // k's rotation for the cache: its own Func (out_k's is placed in out_k's
  // loops), reading q's cos/sin (and xPos) stages, or with
  // own_cache_stages copies of them (the same arithmetic) that a schedule
  // can place apart (one Func has one place).
  if (own_cache_stages) {
    const RopeFrequencies freqs = compute_frequencies(spec);
    if (spec.frequency.scheme == FrequencyScheme::Table)
      a.kv_cos_sin = cos_sin_from_cache(spec, a, "kv_cos_sin");
    else
      std::tie(a.kv_reduced, a.kv_cos_sin) = detail::cos_sin_stages(a, static_cast<float>(freqs.attention_factor), "kv_");
    if (spec.xpos.enabled) a.kv_xpos_scale = xpos_stage(spec, a, freqs, "kv_");
  }
  RotatedTensor kv_k;
  kv_k.input = a.k.input;
  kv_k.rotated = a.kv_rotated_k = Func("kv_rotated_k");
  define_rotation(spec, a, kv_k, true, false, a.kv_cos_sin, a.kv_xpos_scale);

  // The caches' pure definitions write nothing; each update scatters
  // rows of the appended tokens (the last RDom dim: token; where() keeps
  // the appended ones) at their entries.
  auto cache_func = [&](Func& cache, const char* name) {
    cache = Func(name);
    cache(a.d, a.h, a.e, a.pg) = undef(cache_type(kv));
  };
  auto tokens = [](const ImageParam& in) { return std::pair{in.dim(2).min(), in.dim(2).extent()}; };
  const Expr b0 = k.dim(3).min();

  // k, update 0: the rotary dims, pair by pair as out_k holds them (output
  // pairing): rows (r, m, h, t), stores dense along r as out_k's are.
  const int off = spec.rotary_offset, half = spec.num_pairs(), pass = spec.head_dim - spec.rotary_dim;
  cache_func(a.k_cache, "k_cache");
  a.k_cache.output_buffer().dim(0).set_bounds(0, spec.head_dim);  // k's rows: whole heads
  define_kv_target(spec, a);
  {
    const auto [t0, nt] = tokens(k);
    a.k_rows = RDom({{0, half}, {0, 2}, {k.dim(1).min(), k.dim(1).extent()}, {t0, nt}}, "k_cache_rows");
    const RDom& r = a.k_rows;
    const CacheEntry at = cache_entry(a, r.w, a.k_cache);
    a.k_rows.where(at.appended);
    a.k_cache(dim_of(spec, spec.output_pairing, r.x, r.y), r.z, at.entry, at.page) =
        cache_value_from_float(kv, a.kv_rotated_k(r.x, r.y, r.z, r.w, b0), a.k_scale,
                               Bf16Rounding::InstructionWhereAvailable);
  }
  // k, update 1 (partial rotary): the other dims copied.
  if (pass > 0) {
    const auto [t0, nt] = tokens(k);
    a.k_pass_rows = RDom({{0, pass}, {k.dim(1).min(), k.dim(1).extent()}, {t0, nt}}, "k_cache_pass_rows");
    const RDom& r = a.k_pass_rows;
    const CacheEntry at = cache_entry(a, r.z, a.k_cache);
    a.k_pass_rows.where(at.appended);
    const Expr d = select(r.x < off, r.x, r.x + spec.rotary_dim);
    a.k_cache(d, r.y, at.entry, at.page) = as_cache_value(k(d, r.y, r.z, b0), spec.dtype, kv, a.k_scale);
  }
  // v, update 0: rows (d, h, t) copied; they span the cache's dims (GPU
  // staging pads v's rows).
  if (a.variant.with_v) {
    a.v = ImageParam(a.q.input.type(), 4, "v");
    cache_func(a.v_cache, "v_cache");
    const auto [t0, nt] = tokens(a.v);
    a.v_rows = RDom({{0, a.v_cache.output_buffer().dim(0).extent()}, {a.v.dim(1).min(), a.v.dim(1).extent()}, {t0, nt}},
                    "v_cache_rows");
    const RDom& r = a.v_rows;
    const CacheEntry at = cache_entry(a, r.z, a.v_cache);
    a.v_rows.where(at.appended);
    a.v_cache(r.x, r.y, at.entry, at.page) = as_cache_value(a.v(r.x, r.y, r.z, b0), spec.dtype, kv, a.v_scale);
  }
}

RopeAlgorithm build_rope(const RopeSpec& forward_spec, const KernelVariant& variant, bool own_cache_stages) {
  const RopeSpec spec = kernel_spec(forward_spec, variant);
  RopeAlgorithm a;
  a.variant = variant;
  const Type type = storage_type(spec.dtype);
  a.q.input = ImageParam(type, 4, "q");
  a.q.rotated = Func("rotated_q");
  a.q.output = Func("out_q");
  a.positions = ImageParam(position_type(variant), spec.axes.enabled() ? 3 : 2, "positions");
  // Position ids may be strided ([S, B] in sbhd) or broadcast ([S] shared: batch stride 0).
  a.positions.dim(0).set_stride(Expr());
  a.cu_seqlens = ImageParam(Int(32), 1, "cu_seqlens");
  a.freqs = ImageParam(Float(32), 1, "freqs");
  a.cos_sin_cache = ImageParam(Float(32), 2, "cos_sin_cache");

  detail::define_positions(spec, a, pair_axis(spec, a.r));

  const RopeFrequencies freqs = compute_frequencies(spec);
  if (spec.frequency.scheme == FrequencyScheme::Table) {
    a.cos_sin = cos_sin_from_cache(spec, a, "cos_sin");
  } else {
    a.inv_freq = Func("inv_freq");
    a.inv_freq(a.r) = inv_freq_expr(spec, a);
    a.quarter_turns = Func("quarter_turns");
    a.quarter_turns(a.r) = quarter_turns_split(a.inv_freq(a.r));
    detail::define_cos_sin(a, static_cast<float>(freqs.attention_factor));
  }

  if (spec.xpos.enabled) {
    a.uses_seq_len = true;
    a.xpos_scale = xpos_stage(spec, a, freqs, "");
  }

  define_rotation(spec, a, a.q, false);
  if (variant.with_k || spec.kv_cache.enabled) {
    a.k.input = ImageParam(type, 4, "k");
    a.k.rotated = Func("rotated_k");
    if (variant.with_k) a.k.output = Func("out_k");
    define_rotation(spec, a, a.k, true, variant.with_k);
  }
  if (spec.kv_cache.enabled) define_kv_append(spec, a, own_cache_stages);
  if (variant.backward && a.uses_freqs) define_frequency_gradient(spec, a, freqs);
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

std::vector<Argument> RopeAlgorithm::arguments() const {
  // Fixed order (documented in manifest.json): q (or x), k, positions,
  // cu_seqlens, table, freqs, cos_sin_cache, saved_q, saved_k, offset, seq_len
  // (kv_cache specs: v after k, the page table or slot mapping after
  // cos_sin_cache, fp8 caches' k_scale, v_scale; CPU schedules' pool_threads last).
  std::vector<Argument> args = {q.input};
  if (k.input.defined()) args.push_back(k.input);
  if (v.defined()) args.push_back(v);
  if (uses_positions) args.push_back(positions);
  if (uses_cu_seqlens) args.push_back(cu_seqlens);
  if (uses_table) args.push_back(table);
  if (uses_freqs) args.push_back(freqs);
  if (uses_cos_sin_cache) args.push_back(cos_sin_cache);
  if (uses_page_table) args.insert(args.end(), {kv_indices, kv_indptr, batch_indices, cache_positions});
  if (uses_slot_mapping) args.push_back(slot_mapping);
  if (q.saved.defined()) args.push_back(q.saved);
  if (k.saved.defined()) args.push_back(k.saved);
  if (uses_offset) args.push_back(offset);
  if (uses_seq_len) args.push_back(seq_len);
  if (uses_k_scale) args.push_back(k_scale);
  if (uses_v_scale) args.push_back(v_scale);
  if (uses_pool_threads) args.push_back(pool_threads);
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
  std::vector<Func> out = {q.output};
  if (variant.with_k) out.push_back(k.output);
  if (k_cache.defined()) out.push_back(k_cache);
  if (v_cache.defined()) out.push_back(v_cache);
  if (d_freqs.defined()) out.push_back(d_freqs);
  return out;
}

}  // namespace ropegen::lowering
