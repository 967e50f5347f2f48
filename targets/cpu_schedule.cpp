// CPU schedule (x86 SSE/AVX/AVX-512, ARM NEON). Shape:
//   parallel over token tiles (x batch) -> cos/sin for the tile, once,
//   shared by every head -> per row (token, head), per vector of pairs:
//   both members into registers, then both stored (in place is correct).
// Evidence: README.md's bench table (2-core VM, same-run ratio to a copy).
// A row-sized intermediate stage instead of the register stage cost 30% at
// [1,128,32] (0.53 vs 0.76 of copy): twice the loads and stores per element.
#include "schedule.h"

namespace ropegen::targets {
namespace {

using namespace Halide;

int vector_lanes(const Target& target) { return target.natural_vector_size<float>(); }

// Tokens per parallel task: enough work to amortise the task, few enough
// that cos/sin of the tile (tokens x pairs x 8 bytes) stays in L1.
int tokens_per_tile(const RopeSpec& spec) { return spec.num_pairs() >= 64 ? 8 : 16; }

// Heads of one token are adjacent in memory except in bhsd, where a head's
// tokens are; the loop over the tile's tokens goes inside or outside heads.
bool heads_inside_tokens(Layout layout) { return layout != Layout::BHSD; }

// Parallel tasks are tiles of tokens (x batch; sbhd, whose batches of a
// token are adjacent, loops over the batch inside a tile); returns the tile loop.
template <typename V>
Var tile_tokens(Func f, const V& vars, Layout layout, int tokens, std::vector<VarOrRVar> inner,
                bool batch_inside = false) {
  Var so("so"), si("si"), tile("tile");
  f.split(vars.s, so, si, tokens, TailStrategy::GuardWithIf);
  if (heads_inside_tokens(layout)) inner.insert(inner.end(), {vars.h, si});
  else inner.insert(inner.end(), {si, vars.h});
  if (batch_inside || layout == Layout::SBHD) {
    inner.insert(inner.end(), {vars.b, so});
    f.reorder(inner).parallel(so);
    return so;
  }
  inner.insert(inner.end(), {so, vars.b});
  f.reorder(inner).fuse(so, vars.b, tile).parallel(tile);
  return tile;
}

void schedule_tensor(const lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, Func reduced, Func cos_sin,
                     Func xpos, const RopeSpec& spec, const Target& target) {
  const int lanes = vector_lanes(target);
  const bool interleaved = spec.output_pairing == Pairing::Interleaved;
  // Per vector chunk of pairs, both members are computed into registers
  // (`rotated`, computed at the chunk) before either is stored, so no pair
  // is read after its partner was stored: in place is safe by construction.
  // Interleaved: the two unrolled member stores merge into one dense store.
  Var chunk("chunk"), lane("lane");
  t.output.split(a.r, chunk, lane, lanes, TailStrategy::GuardWithIf);
  const int tokens = tokens_per_tile(spec);
  const Var tile = interleaved ? tile_tokens(t.output, a, spec.layout, tokens, {a.m, lane, chunk})
                               : tile_tokens(t.output, a, spec.layout, tokens, {lane, a.m, chunk});
  t.output.vectorize(lane).unroll(a.m);
  t.rotated.compute_at(t.output, chunk).vectorize(a.r, lanes, TailStrategy::GuardWithIf).unroll(a.m);

  // cos/sin once per token of the tile, shared by every head.
  cos_sin.compute_at(t.output, tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  reduced.compute_at(cos_sin, a.r).vectorize(a.r);  // once for both sin and cos
  if (xpos.defined()) xpos.compute_at(t.output, tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
}

}  // namespace

void schedule_pass_through_cpu(lowering::PassThroughCopy& c, const RopeSpec& spec, const Target& target) {
  tile_tokens(c.output, c, spec.layout, tokens_per_tile(spec), {c.d});
  c.output.vectorize(c.d, vector_lanes(target), TailStrategy::GuardWithIf);
}

void schedule_rope_cpu(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  a.inv_freq.compute_root();
  if (a.quarter_turns.defined()) a.quarter_turns.compute_root();
  schedule_tensor(a, a.q, a.reduced, a.cos_sin, a.xpos_scale, spec, target);
  if (a.variant.with_k) {
    // k gets its own copy of the per-tile cos/sin, placed in its own loops.
    Func cs_k = a.cos_sin.clone_in(a.k.rotated);
    Func reduced_k = a.reduced.clone_in(cs_k);
    Func xpos_k = a.xpos_scale.defined() ? a.xpos_scale.clone_in(a.k.rotated) : Func();
    schedule_tensor(a, a.k, reduced_k, cs_k, xpos_k, spec, target);
  }
}

// Sinusoidal, learned, ALiBi: out(d, h, s, b) = x + PE, vectorised along
// the dense dim, parallel over tiles of tokens (query rows for ALiBi).
// Sinusoidal cos/sin are computed once per (pair, token) of the tile.
// Sinusoidal PE with implicit positions is shared by the batch: tiles are
// tokens only, the batch loops inside, and the tile's cos/sin serve every
// sequence (0.37 -> 0.60 of copy at [4, 4096] x 1024 f32, one thread).
void schedule_encoding_cpu(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  const int lanes = vector_lanes(target);
  Func out = a.q.output;
  const bool shared_rows = a.cos_sin.defined() && spec.positions == PositionsMode::Implicit;
  const Var tile = tile_tokens(out, a, lowering::kernel_layout(spec), 16, {a.d}, shared_rows);
  out.vectorize(a.d, lanes, TailStrategy::GuardWithIf);
  if (!a.cos_sin.defined()) return;
  a.inv_freq.compute_root();
  a.cos_sin.compute_at(out, tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  a.reduced.compute_at(a.cos_sin, a.r).vectorize(a.r);
}

}  // namespace ropegen::targets
