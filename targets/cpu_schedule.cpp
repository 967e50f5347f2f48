// CPU schedule (x86 SSE/AVX/AVX-512, ARM NEON). Shape:
//   parallel over token tiles (x batch; short sequences grouped), q then k
//   in each tile -> cos/sin for the tile, once, shared by every head of q
//   and k -> per row (token, head), per vector of pairs:
//   both members into registers, then both stored (in place is correct).
// Evidence: docs/performance.md's bench tables (2-core VMs, same-run ratio to a copy).
// A row-sized intermediate stage instead of the register stage cost 30% at
// [1,128,32] (0.53 vs 0.76 of copy): twice the loads and stores per element.
#include "schedule.h"

namespace ropegen::targets {
namespace {

using namespace Halide;

int vector_lanes(const Target& target) { return target.natural_vector_size<float>(); }

// The extent of a Func's dim `v`, read from its output buffer (1 if it has none).
Expr extent_of(Func f, const Var& v) {
  const std::vector<Var> args = f.args();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].same_as(v)) return f.output_buffer().dim(static_cast<int>(i)).extent();
  return Expr(1);
}

// Tokens per parallel task (tile): the call's tokens shared out, one task
// per thread of the pool, but at least S / 16 of a sequence's tokens; at
// least 8 (16 below 64 pairs), at most 256. Without `threads`, S / 16.
// `threads` is the kernel's pool_threads argument, which the caller reads
// from the runtime: read inside the pipeline, the pool's size was read once
// per use, and another thread resizing the pool during a call could give
// the tile's loops and its cos/sin allocation different sizes.
// Short calls (decode, small prefill): one task per thread, where 8-token
// tasks cost more than they balance. Evidence (2-core Zen 5, llama3-8B
// q 32 + k 8 heads bf16 out of place, 1 / 2 threads, us; the table kernel
// in the same runs): 8-token tasks -> this, decode [64, 1] random ids
// 16.4 / 9.9-10.7 -> 14.8-15.2 / 8.4-8.8 (table 14.0-14.6 / 7.3-7.7);
// [1, 128] 31-32 / 19.1-19.9 -> 28.7-29.8 / 16.7-17.3 (table 24.9-27.8 /
// 13.8-14.4), over two rope-gen bench and two make bench runs.
// Long sequences (2-core Zen 5, llama3-8B q 32 + k 8 heads bf16 [4, 4096]
// out of place, ratio to the same-run memcpy, 1 / 2 threads; the table
// kernel 0.94-0.97 / 0.99): tiles of 8 tokens 0.75 / -, 16 0.78 / 0.92, 32
// 0.84 / 0.96, 64 0.88 / -, 128 0.91 / 0.98, 256 0.93 / 0.99, 1024 0.95 /
// 0.98. perf shows no per-task cost;
// likely cause: a tile streams q's rows, then k's, from four places, and
// short runs of each restart the hardware prefetchers (not verified). A
// tile's cos/sin (up to 128 KiB) is then read from L2, at no measurable cost.
template <typename V>
Expr tokens_per_tile(const RopeSpec& spec, Func f, const V& vars, Expr threads = Expr()) {
  const Expr tokens = extent_of(f, vars.s), fewest = spec.num_pairs() >= 64 ? 8 : 16;
  if (!threads.defined()) return clamp(tokens / 16, fewest, 256);
  threads = clamp(threads, 1, 1024);
  // sbhd tiles hold every sequence of their tokens (tile_tokens).
  const Expr sequences = spec.layout == Layout::SBHD ? Expr(1) : extent_of(f, vars.b);
  const Expr call_tokens = cast<int64_t>(tokens) * sequences;
  const Expr per_thread = cast<int32_t>(min((call_tokens + threads - 1) / threads, 256));
  return clamp(max(tokens / 16, per_thread), fewest, 256);
}

// cos/sin read from a cache (scheme table) with one position per token: a
// pair chunk's cos and sin are dense vector loads from the token's row.
bool cos_sin_are_row_loads(const lowering::RopeAlgorithm& a, const RopeSpec& spec) {
  return a.uses(lowering::Arg::CosSinCache) && !spec.axes.enabled();
}

// Heads of one token are adjacent in memory except in bhsd, where a head's
// tokens are; the loop over the tile's tokens goes inside or outside heads.
bool heads_inside_tokens(Layout layout) { return layout != Layout::BHSD; }

// Parallel tasks are tiles of tokens (x batch; sbhd, whose batches of a
// token are adjacent, loops over the batch inside a tile); returns the
// loop over a sequence's tiles. A tile of sequences shorter than `tokens`
// (decode: S == 1) takes as many of them as make about `tokens` tokens, so
// [64, 1] runs as 8 tasks like [1, 64], not 64 one-token tasks; per-tile
// stages (cos/sin) cover exactly the tile's tokens either way. The loops
// over batch groups and over a sequence's tiles are both parallel, nested
// rather than fused: k's loops computed with q's fused ones (compute_with)
// made Halide 21 size each tile's cos/sin from the sequence's first token
// (1 x 128 bf16, 1 thread: 50 -> 105 us).
// `stage`: f's pure definition, or one of its specializations.
// `sequences`: sequences per tile, if not short_sequences_per_tile.
template <typename V>
Expr short_sequences_per_tile(Func f, const V& vars, const Expr& tokens) {
  return max(1, tokens / max(extent_of(f, vars.s), 1));
}

template <typename V>
Var tile_tokens(Func f, Stage stage, const V& vars, Layout layout, const Expr& tokens, std::vector<VarOrRVar> inner,
                bool batch_inside = false, Expr sequences = Expr()) {
  Var so("so"), si("si"), bo("bo"), bi("bi");
  stage.split(vars.s, so, si, tokens, TailStrategy::GuardWithIf);
  if (heads_inside_tokens(layout)) inner.insert(inner.end(), {vars.h, si});
  else inner.insert(inner.end(), {si, vars.h});
  if (batch_inside || layout == Layout::SBHD) {
    inner.insert(inner.end(), {vars.b, so});
    stage.reorder(inner).parallel(so);
    return so;
  }
  if (!sequences.defined()) sequences = short_sequences_per_tile(f, vars, tokens);
  stage.split(vars.b, bo, bi, sequences, TailStrategy::GuardWithIf);
  inner.insert(inner.end(), {bi, so, bo});
  stage.reorder(inner).parallel(so).parallel(bo);
  return so;
}

template <typename V>
Var tile_tokens(Func f, const V& vars, Layout layout, const Expr& tokens, std::vector<VarOrRVar> inner,
                bool batch_inside = false, const Expr& sequences = Expr()) {
  return tile_tokens(f, Stage(f), vars, layout, tokens, std::move(inner), batch_inside, sequences);
}

// Sequences per tile where cos/sin are the batch's (lowering's
// cos_sin_shared_by_batch): as many as still leave a tile per thread of
// the pool, so that a tile computes its tokens' cos/sin once for all of
// them (before, once per sequence); at least as many as tile_tokens groups
// for short sequences. Evidence (2-core Zen 5, llama3-8B q 32 + k 8 heads,
// bf16, us, rope-gen / the table kernel in the same runs, three A/B runs
// of each binary): 1 thread, [4, 4096] in place 5629-5747 / 5000-5184 ->
// 5429-5506 / 5029-5086, out of place 8610-8783 / 8407-8710 -> 8537-8564
// / 8429-8725; [8, 512] out of place 1767-1803 / 1700-1716 -> 1725-1740 /
// 1694-1712; [64, 1] in place at one position 11.1-11.3 / 10.2-10.3 ->
// 10.0-10.1 / 10.3-10.4; 2 threads, [4, 4096] in place 4707-4739 /
// 4605-4647 -> 4633-4696 / 4587-4645. f32 [4, 4096] in place: no change.
template <typename V>
Expr batch_sharing_sequences(Func f, const V& vars, const Expr& tokens, const Expr& threads) {
  const Expr seq = max(extent_of(f, vars.s), 1), batch = max(extent_of(f, vars.b), 1);
  const Expr sequence_tiles = (seq + tokens - 1) / tokens;
  const Expr pool = cast<int32_t>(clamp(threads, 1, 1024));
  const Expr groups = clamp((pool + sequence_tiles - 1) / sequence_tiles, 1, batch);
  return max(short_sequences_per_tile(f, vars, tokens), (batch + groups - 1) / groups);
}

// Places one rotated tensor's output and register stage; returns its tile
// loop. `tokens`: q's tile, for k too (k is computed with q's tiles);
// `sequences`: sequences per tile (tile_tokens).
Var schedule_tensor(const lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, const RopeSpec& spec,
                    const Target& target, const Expr& tokens, const Expr& sequences) {
  const int lanes = vector_lanes(target);
  const bool interleaved = spec.output_pairing == Pairing::Interleaved;
  // Per vector chunk of pairs, both members are computed into registers
  // (`rotated`, computed at the chunk) before either is stored, so no pair
  // is read after its partner was stored: in place is safe by construction.
  // Interleaved: the two unrolled member stores merge into one dense store.
  Var chunk("chunk"), lane("lane");
  t.output.split(a.r, chunk, lane, lanes, TailStrategy::GuardWithIf);
  const Var tile = interleaved ? tile_tokens(t.output, a, spec.layout, tokens, {a.m, lane, chunk}, false, sequences)
                               : tile_tokens(t.output, a, spec.layout, tokens, {lane, a.m, chunk}, false, sequences);
  t.output.vectorize(lane).unroll(a.m);
  t.rotated.compute_at(t.output, chunk).vectorize(a.r, lanes, TailStrategy::GuardWithIf).unroll(a.m);
  return tile;
}

// qk_norm: per row (token, head), the partial sums of squares (eight
// float64 lanes, vectorised), then both members of every pair into a
// row-sized stage, then the whole row stored, vectorised along the head
// dim: a row is read whole before any of it is stored, so in place is
// safe. The row stages stay in L1 (head_dim floats).
Var schedule_whole_row_tensor(const lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, const RopeSpec& spec,
                              const Target& target, const Expr& tokens, const Expr& sequences) {
  const int lanes = vector_lanes(target);
  Var chunk("chunk"), lane("lane");
  t.output.split(a.d, chunk, lane, lanes, TailStrategy::GuardWithIf);
  const Var tile = tile_tokens(t.output, a, spec.layout, tokens, {lane, chunk}, false, sequences);
  t.output.vectorize(lane);
  // The innermost loop over rows (tile_tokens' token loop is "si"), and
  // the one around it (a token's heads, or a head's tokens in the tile).
  const bool heads_inside = heads_inside_tokens(spec.layout);
  const Var row = heads_inside ? a.h : Var("si"), rows = heads_inside ? Var("si") : a.h;
  // 1 / rms for all rows of that loop before any, vectorised across rows:
  // its float64 steps are one dependent chain per row, whose latency
  // (~45 ns a row, by the bench below) a row at a time left exposed. Each
  // vector of rows adds up its squares first (eight float64 lanes).
  // compare_bench --qk-norm (2-core EPYC VM, AVX2, bf16, q 32 + k 8 heads
  // of 128, 1 thread), fused us, a row at a time -> vectorised across rows:
  // decode [64, 1] 173.9 -> 113.5, prefill [4, 4096] 44898 -> 28656 (0.37
  // -> 0.54 of memcpy's speed).
  const Var across = heads_inside ? a.h : a.s;
  if (t.inv_rms.defined()) {  // qk_norm (fp8 outputs without it: the rotation and the stores)
    t.inv_rms.compute_at(t.output, rows).vectorize(across, 8, TailStrategy::GuardWithIf);
    t.square_sums.compute_at(t.inv_rms, across).vectorize(a.d).update(0).vectorize(a.d);
  }
  t.rotated.compute_at(t.output, row).vectorize(a.r, lanes, TailStrategy::GuardWithIf).unroll(a.m);
  // output_quant: the row's group scales after its rotation, before its stores.
  if (t.group_scales.defined()) t.group_scales.compute_at(t.output, row);
  // Stored in the output's order, so the whole-row stores read it densely.
  if (spec.output_pairing == Pairing::Interleaved) t.rotated.reorder_storage(a.m, a.r);
  // The backward: dL/d(normed) as a row stage too (read by the dot
  // product's sums and the stores), and the sums of g . x as the squares'.
  // The row is read whole before any of it is stored: in place is safe.
  // Untimed.
  if (t.normed_gradient.defined()) {
    t.normed_gradient.compute_at(t.output, row).vectorize(a.d, lanes, TailStrategy::GuardWithIf);
    t.dot_sums.compute_at(t.output, row).vectorize(a.d).update(0).vectorize(a.d);
    t.norm_coefficient.compute_at(t.output, row);
  }
  return tile;
}

// output_quant's out_scales: its own loops, tiled as q's, its rotation per
// row and its own cos/sin per tile (an output cannot read stages placed in
// another's loops). Untimed.
void schedule_output_scales(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target, const Expr& tokens,
                            const Expr& sequences) {
  Func out = a.q.out_scales;
  if (!out.defined()) return;
  const int lanes = vector_lanes(target);
  const Var tile = tile_tokens(out, a, spec.layout, tokens, {a.d}, false, sequences);
  const Var row = heads_inside_tokens(spec.layout) ? a.h : Var("si");
  a.q.scales_rotated.compute_at(out, row).vectorize(a.r, lanes, TailStrategy::GuardWithIf).unroll(a.m);
  lowering::CosSinStages own = a.output_scales;  // Funcs are handles: scheduling a copy schedules them
  if (!cos_sin_are_row_loads(a, spec))
    own.cos_sin.compute_at(out, tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  if (own.reduced.defined()) own.reduced.compute_at(own.cos_sin, a.r).vectorize(a.r);
  if (own.xpos_scale.defined()) own.xpos_scale.compute_at(out, tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
}

// The fused KV-cache append: each scatter (an update over a row's dims,
// head, token) runs parallel over tiles of 16 tokens, a row's dims
// vectorised (k's rotary update: pairs, both members unrolled, as out_k
// stores them). cos/sin (and xPos scales) are computed once per (pair,
// token) for q, out_k and the cache (compute_root, parallel over tiles of
// tokens): one Func cannot be placed in both q's tiles and the scatter's,
// and computing them again for the cache cost more than the whole copy it
// saves (bench/kv_append_bench, 2-core VM, one thread, bf16, fused vs
// rope-then-copy: decode 64 x 1 36.0 vs 26.5 us with its own cos/sin,
// 34.7 vs 26.5 shared; prefill 1 x 512 208.8 vs 202.6, then 196.8 vs
// 203.2). Races: each entry takes at most one token (prepare_call
// checks), so the tokens' writes never meet.
void schedule_kv_append(lowering::RopeAlgorithm& a, const Target& target) {
  const int lanes = vector_lanes(target);
  auto tiles = [&](Stage stage, const RVar& inner, const RVar& token, std::vector<VarOrRVar> order, const char* name) {
    RVar to(std::string(name) + "_to"), ti(std::string(name) + "_ti");
    order.insert(order.end(), {ti, to});
    stage.allow_race_conditions()
        .split(token, to, ti, 16, TailStrategy::GuardWithIf)
        .reorder(order)
        .parallel(to)
        .vectorize(inner, lanes, TailStrategy::GuardWithIf);
    return to;
  };
  // Each token's entry and page once per call, vectorised, before the
  // scatters. Inline, Halide repeats the checks of every index (lowering's
  // kv_target) at each loop level of the scatter and reloads the index
  // tensors per vector. kv_append_bench (2-core Zen 5, busy, one thread,
  // fused / rope-then-copy ratio), before these checks -> inline (2 runs)
  // -> this (median of 3): prefill 1 x 512 1.014 -> 0.94-0.97 -> 1.001,
  // 4 x 128 1.030 -> 0.94-0.98 -> 1.015, decode 64 x 1 0.663 -> 0.63-0.64
  // -> 0.662.
  a.kv.target.compute_root().vectorize(a.s, lanes, TailStrategy::GuardWithIf);
  // qk_norm: k's 1 / rms once per row for every reader (out_k and the
  // scatters), before them. Untimed.
  if (a.k.inv_rms.defined()) {
    Var so("so"), si("si");
    a.k.inv_rms.compute_root().split(a.s, so, si, 16, TailStrategy::GuardWithIf).parallel(so);
    a.k.square_sums.compute_at(a.k.inv_rms, a.h).vectorize(a.d).update(0).vectorize(a.d);
  }
  const RDom& k = a.kv.k_rows;
  const RVar to = tiles(a.kv.k_cache.update(0), k.x, k.w, {k.x, k.y, k.z}, "k");
  a.kv.k_cache.update(0).unroll(k.y);
  Var so("so"), si("si");
  for (Func f : {a.cos_sin, a.xpos_scale})
    if (f.defined())
      f.compute_root().split(a.s, so, si, 16, TailStrategy::GuardWithIf).parallel(so).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  if (a.kv.k_pass_rows.defined()) {
    const RDom& p = a.kv.k_pass_rows;
    tiles(a.kv.k_cache.update(1), p.x, p.z, {p.x, p.y}, "k_pass");
  }
  if (a.kv.v_cache.defined()) {
    const RDom& v = a.kv.v_rows;
    tiles(a.kv.v_cache.update(0), v.x, v.z, {v.x, v.y}, "v");
  }
}

// A sum over tokens (lowering/token_sum.h) along index var i: parallel
// over level 1's groups of tokens (x sequence), each group's tokens' terms
// (level 0) computed one token at a time in its loop; i innermost and
// vectorised in every stage (the entries are independent sums, so moving i
// inside the RDoms keeps every sum's order). The levels above are tiny (one
// entry per group): serial. Returns level 1's entry loop (a token), where
// the callers place level 0's per-token stages.
RVar schedule_token_sum(const lowering::TokenSum& sums, const Var& i, int lanes) {
  auto vectorized = [&](Func f) {
    f.vectorize(i, lanes, TailStrategy::GuardWithIf);
    for (int u = 0; u < f.num_update_definitions(); ++u) {
      std::vector<VarOrRVar> order = {i};
      for (const auto& rv : f.update(u).get_schedule().rvars()) order.push_back(RVar(rv.var));
      f.update(u).reorder(order).vectorize(i, lanes, TailStrategy::GuardWithIf);
    }
  };
  const std::vector<Func>& levels = sums.levels;
  Func token = levels[0], groups = levels[1], sum = sums.sum;
  const RVar entry(groups.update(0).get_schedule().rvars()[0].var);
  vectorized(groups);
  Var group("group");
  groups.compute_root().update(0).fuse(groups.args()[1], groups.args()[2], group).parallel(group);
  token.compute_at(groups, entry);
  vectorized(token);
  for (size_t level = 2; level < levels.size(); ++level) {
    Func above = levels[level];
    above.compute_root();
    vectorized(above);
  }
  sum.compute_root();
  vectorized(sum);
  return entry;
}

// dL/d(inv_freq) (lowering's d_freqs_levels): a token sum along pairs,
// with the token's cos/sin (and xPos scales) computed once for every head
// of q and k in its loop.
// 2-core Zen 5 (busy), q 32 + k 8 heads of 128, backward call with
// dL/d(inv_freq), one thread, median us, before (one serial sum over every
// row, cos/sin per row) -> after: bf16 [1, 2048] 6800 -> 2200, f32 [1,
// 2048] 9600 -> 6100, bf16 [1, 100] 112 -> 63, [64, 1] 69 -> 44. (With
// the last group's tail as zero terms instead of where(), each of its
// tokens was computed once per missing entry: [64, 1] took 158.)
void schedule_frequency_gradient(lowering::RopeAlgorithm& a, const Target& target) {
  if (!a.gradient.d_freqs.defined()) return;
  const int lanes = vector_lanes(target);
  const RVar entry = schedule_token_sum(a.gradient.sums, a.r, lanes);
  Func groups = a.gradient.sums.levels[1];
  for (Func f : {a.gradient.cos_sin, a.gradient.xpos_scale})
    if (f.defined()) f.compute_at(groups, entry).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  a.gradient.reduced.compute_at(a.gradient.cos_sin, a.r).vectorize(a.r);
}

// dL/d(qk_norm weights): a token sum along the head dim per tensor; level
// 0's token takes its heads in turn, each head's own sums of squares, 1 /
// rms and rotation back computed before its terms (vectorised). The own
// cos/sin (shared by q's and k's sums, whose loops differ) once per call,
// parallel over tiles of tokens. Untimed.
void schedule_norm_weight_gradients(lowering::RopeAlgorithm& a, const Target& target) {
  if (!a.q.weight_gradient.d_weight.defined()) return;
  const int lanes = vector_lanes(target);
  Var so("so"), si("si");
  for (Func f : {a.norm_gradient.cos_sin, a.norm_gradient.xpos_scale})
    if (f.defined())
      f.compute_root()
          .split(a.s, so, si, 16, TailStrategy::GuardWithIf)
          .parallel(so)
          .vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  if (a.norm_gradient.reduced.defined())
    a.norm_gradient.reduced.compute_at(a.norm_gradient.cos_sin, a.r).vectorize(a.r);
  for (lowering::RotatedTensor* t : {&a.q, &a.k}) {
    lowering::WeightGradient& g = t->weight_gradient;
    if (!g.d_weight.defined()) continue;
    schedule_token_sum(g.sums, a.d, lanes);
    Func token = g.sums.levels[0];
    const RVar head = g.heads.x;
    g.square_sums.compute_at(token, head).vectorize(a.d).update(0).vectorize(a.d);
    g.inv_rms.compute_at(token, head);
    g.rotated.compute_at(token, head).vectorize(a.r, lanes, TailStrategy::GuardWithIf).unroll(a.m);
  }
}

// The frequencies and their fixed-point split, once per call, vectorised:
// float64 work per pair (per column for sinusoidal) that ran scalar cost
// 7% of a sinusoidal [1, 128] dim 1024 call (perf), and is in every decode
// call's fixed cost.
void schedule_frequencies(lowering::RopeAlgorithm& a, int lanes) {
  for (Func f : {a.inv_freq, a.quarter_turns})
    if (f.defined()) f.compute_root().vectorize(a.r, lanes, TailStrategy::GuardWithIf);
}

}  // namespace

void schedule_pass_through_cpu(lowering::PassThroughCopy& c, const RopeSpec& spec, const Target& target) {
  tile_tokens(c.output, c, spec.layout, tokens_per_tile(spec, c.output, c), {c.d});
  c.output.vectorize(c.d, vector_lanes(target), TailStrategy::GuardWithIf);
}

// k is computed with q, tile by tile (its heads after q's), so each tile's
// cos/sin (and xPos scales) are computed once and serve every head of q
// and k. 2-core Zen 5 (busy), llama3-8B q 32 + k 8 heads, kernel us,
// median of 3, before (k with its own cos/sin in its own loops, one task
// per sequence) -> after: [64, 1] explicit positions bf16 29.5 -> 24.3
// (1 thread), f32 25.1 -> 17.4 (2 threads); [1, 128] bf16 48.3 -> 44.1;
// [4, 4096] unchanged within noise.
void schedule_rope_cpu(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  const int lanes = vector_lanes(target);
  schedule_frequencies(a, lanes);  // undefined: cos/sin read from a cache (scheme table)
  a.use(lowering::Arg::PoolThreads);
  const Expr tokens = tokens_per_tile(spec, a.q.output, a, a.scalar(lowering::Arg::PoolThreads));
  const Expr sequences = a.cos_sin_shared_by_batch
                             ? batch_sharing_sequences(a.q.output, a, tokens, a.scalar(lowering::Arg::PoolThreads))
                             : Expr();
  const auto schedule = a.whole_rows ? schedule_whole_row_tensor : schedule_tensor;
  const Var tile = schedule(a, a.q, spec, target, tokens, sequences);
  if (a.variant.with_k) {
    // k has q's tokens and batch, only its heads differ (call/prepare_call
    // checks); said here, the fused loops need no guards for k.
    const int dims = a.q.output.dimensions();  // (r, m, h, s, b), (m, r, h, s, b) or qk_norm's (d, h, s, b)
    for (int dim : {dims - 2, dims - 1}) {
      const auto q_dim = a.q.output.output_buffer().dim(dim);
      a.k.output.output_buffer().dim(dim).set_bounds(q_dim.min(), q_dim.extent());
    }
    schedule(a, a.k, spec, target, tokens, sequences);
    a.k.output.compute_with(a.q.output, tile);
  }
  // cos/sin once per token of the tile, shared by every head (computed, or
  // gathered from the cache's rows: multi-axis scheme table). A cache row
  // of 1-D positions is read where it is used instead: the first head brings
  // it into L1 for the tile's other heads of q and k, and no copy is made.
  // 2-core Zen 5 (busy), llama3-8B shapes, q 32 + k 8 heads, 1 thread, us,
  // per-tile copy -> read in place: bf16 [4, 4096] 12100-13200 -> 8600-9300
  // (ratio to copy 0.65 -> 0.9, the computing kernel's 0.71), [1, 128] 43 ->
  // 40, f32 [4, 4096] 20100-20400 -> 19300-20100, [64, 1] random ids 29.3
  // -> 28.0. Multi-axis rows are per pair (gathers): read in place they cost
  // 490 us at [1, 128] against 54 us copied once per tile.
  // The tile's size is the call's (tokens_per_tile), so these stages' size
  // is too: on Halide's pseudo-stack, short tiles (decode: 8 tokens, 2 KiB
  // each) are stack memory and only long ones (over 16 KiB) are allocated,
  // once per task. On the heap, two malloc/free pairs per 8-token task took
  // 13% of a [64, 1] q 1 + k 1 heads call (perf).
  if (!cos_sin_are_row_loads(a, spec))
    a.cos_sin.compute_at(a.q.output, tile).store_in(MemoryType::Stack).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  if (a.reduced.defined()) a.reduced.compute_at(a.cos_sin, a.r).vectorize(a.r);  // once for both sin and cos
  if (a.xpos_scale.defined())
    a.xpos_scale.compute_at(a.q.output, tile).store_in(MemoryType::Stack).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  if (a.kv.k_cache.defined()) schedule_kv_append(a, target);
  schedule_frequency_gradient(a, target);
  schedule_norm_weight_gradients(a, target);
  schedule_output_scales(a, spec, target, tokens, sequences);
}

// Sinusoidal, learned, ALiBi: out(d, h, s, b) = x + PE, vectorised along
// the dense dim, parallel over tiles of tokens (query rows for ALiBi).
// Sinusoidal PE with implicit positions is shared by the batch: tiles are
// tokens only, the batch loops inside. Its exact cos/sin are computed once
// per column and 16-position block of the tile (cos_sin_base, lowering's
// angle addition) and PE inline in the row loop (dense loads, two
// multiply-adds); with ids, PE once per (column, token) of the tile.
// Evidence (2-core Zen 5, noisy, dim 512 f32, ratio to the same-run
// memcpy, 1 / 2 threads): exact cos/sin per (pair, token) gathered into
// columns -> this: [1, 128] 0.063 / 0.074 -> 0.20 / 0.20, [4, 4096] 0.22 /
// 0.39 -> 0.49 / 0.60; PE as a tile stage instead of inline: [1, 128]
// 0.15, [4, 4096] 0.60 (one thread).
// Learned PE with implicit positions also shares a tile's table rows by
// the batch, where the sequence has a tile per pool thread (a
// specialization: else tiles of the batch too, as with ids, for
// parallelism at short sequences). Evidence (2-core Intel AVX512-BF16 VM,
// dim 1024 f32 bsd, ratio to the same-run memcpy, 1 / 2 threads): batch
// outside -> shared rows: [8, 512] 0.67 / 0.77 -> 0.96 / 0.85-0.86, [4,
// 4096] 0.72 / 0.52 -> 0.74 / 0.61-0.64; [1, 4096], [64, 1] unchanged
// (0.67, 0.65-0.78). Tiles of 32-128 tokens instead of 16: no difference.
// Sinusoidal PE with implicit positions and more than one sequence is a
// stage of the tile's PE rows (lowering's pe_rows; a specialization on
// batch_shares_pe_rows), computed once and added to every sequence's rows,
// not computed again per sequence. Evidence (2-core Zen 5, dim 1024 f32
// bsd, ratio to the same-run memcpy, old / new binary in one session): 1
// thread [4, 4096] 0.63 -> 0.73, [8, 512] 0.47 -> 0.58; 2 threads [4,
// 4096] 0.89 -> 0.96, [8, 512] 0.49 -> 0.54. One sequence keeps PE inline:
// the stage there cost [1, 128] 0.29-0.30 -> 0.22-0.24 and [1, 16384]
// 0.58-0.59 -> 0.50-0.56; the stage per token with the batch inside the
// token loop (four streams in turn) cost [4, 4096] 0.63 -> 0.52.
void schedule_encoding_cpu(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  constexpr int kTileTokens = 16;
  const int lanes = vector_lanes(target);
  Func out = a.q.output;
  const Layout layout = lowering::kernel_layout(spec);
  const bool implicit = spec.positions == PositionsMode::Implicit;
  if (a.uses(lowering::Arg::Table) && implicit && layout != Layout::SBHD) {  // sbd: the batch is inside anyway
    a.use(lowering::Arg::PoolThreads);
    const Expr tiles = (extent_of(out, a.s) + kTileTokens - 1) / kTileTokens;
    Stage rows_shared = out.specialize(tiles >= clamp(a.scalar(lowering::Arg::PoolThreads), 1, 1024));
    tile_tokens(out, rows_shared, a, layout, kTileTokens, {a.d}, true);
    rows_shared.vectorize(a.d, lanes, TailStrategy::GuardWithIf);
  }
  const bool shared_rows = a.cos_sin.defined() && implicit;
  if (a.pe_rows.defined()) {
    Stage batched = out.specialize(a.batch_shares_pe_rows);
    tile_tokens(out, batched, a, layout, kTileTokens, {a.d}, true);
    batched.vectorize(a.d, lanes, TailStrategy::GuardWithIf);
  }
  const Var tile = tile_tokens(out, a, layout, kTileTokens, {a.d}, shared_rows);
  out.vectorize(a.d, lanes, TailStrategy::GuardWithIf);
  if (!a.cos_sin.defined()) return;
  if (a.pe_rows.defined()) a.pe_rows.compute_at(out, tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  schedule_frequencies(a, lanes);
  if (!a.cos_sin_base.defined()) a.cos_sin.compute_at(out, tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  Func exact = a.cos_sin_base.defined() ? a.cos_sin_base : a.cos_sin;
  if (a.cos_sin_base.defined())
    a.cos_sin_base.compute_at(out, tile).store_in(MemoryType::Stack).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  a.reduced.compute_at(exact, a.r).vectorize(a.r);
}

}  // namespace ropegen::targets
