// CPU schedule. Evidence (2-core AVX2 VM, fp32 bshd, head_dim 128, 32 heads):
// see README.md's bench table. Shape of the schedule:
//   parallel over token tiles (x batch) -> cos/sin for the tile, once,
//   shared by every head -> per row (token, head): rotate all pairs into a
//   small buffer, then store. Rows are read whole before they are written,
//   which makes output == input (in place) correct.
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
bool heads_inside_tokens(const RopeSpec& spec) { return spec.layout != Layout::BHSD; }

void schedule_tensor(lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, Func cos_sin, Func xpos,
                     const RopeSpec& spec, const Target& target) {
  const int lanes = vector_lanes(target);
  const bool interleaved = spec.pairing == Pairing::Interleaved;
  Var so("so"), si("si"), tile("tile");
  RVar pr = t.pair, pm = t.member;

  // Every stage of the output (rotary pairs, pass-through ranges) gets the
  // same outer loops so the pass-through stages can be fused into them.
  auto outer_loops = [&](Stage st, std::vector<VarOrRVar> inner) {
    st.split(a.s, so, si, tokens_per_tile(spec), TailStrategy::GuardWithIf);
    std::vector<VarOrRVar> order = inner;
    if (heads_inside_tokens(spec)) order.insert(order.end(), {a.h, si});
    else order.insert(order.end(), {si, a.h});
    if (spec.layout == Layout::SBHD) order.insert(order.end(), {a.b, so});
    else order.insert(order.end(), {so, a.b});
    st.reorder(order);
    if (spec.layout == Layout::SBHD) st.parallel(so);
    else st.fuse(so, a.b, tile).parallel(tile);
  };

  Stage rotary = t.output.update(0);
  // Interleaved: both members of a pair, unrolled, become one dense store.
  if (interleaved) outer_loops(rotary, {pm, pr});
  else outer_loops(rotary, {pr, pm});
  // Pair r's two members are distinct dims and distinct pairs never share
  // one, so the stores are disjoint; Halide cannot prove it for r + m*half.
  rotary.allow_race_conditions().vectorize(pr, lanes, TailStrategy::GuardWithIf).unroll(pm);

  // Stage 1 is the rotary update (stage 0 is the undefined pure definition).
  t.rotated.compute_at(LoopLevel(t.output, heads_inside_tokens(spec) ? a.h : si, -1))
      .vectorize(a.r, lanes, TailStrategy::GuardWithIf)
      .unroll(a.m);
  if (interleaved) t.rotated.reorder_storage(a.m, a.r);

  const LoopLevel per_tile(t.output, spec.layout == Layout::SBHD ? so : tile, -1);
  cos_sin.compute_at(per_tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);
  if (xpos.defined()) xpos.compute_at(per_tile).vectorize(a.r, lanes, TailStrategy::GuardWithIf);

  for (size_t u = 0; u < t.pass_through.size(); ++u) {
    Stage pass = t.output.update(static_cast<int>(u) + 1);
    outer_loops(pass, {t.pass_through[u].x});
    pass.allow_race_conditions().vectorize(t.pass_through[u].x, lanes, TailStrategy::GuardWithIf);
  }
}

}  // namespace

void schedule_rope_cpu(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  a.inv_freq.compute_root();
  schedule_tensor(a, a.q, a.cos_sin, a.xpos_scale, spec, target);
  if (a.variant.with_k) {
    // k gets its own copy of the per-tile cos/sin, placed in its own loops.
    Func cs_k = a.cos_sin.clone_in(a.k.rotated);
    Func xpos_k = a.xpos_scale.defined() ? a.xpos_scale.clone_in(a.k.rotated) : Func();
    schedule_tensor(a, a.k, cs_k, xpos_k, spec, target);
  }
}

}  // namespace ropegen::targets
