// GPU schedule (CUDA, Vulkan). Shape of one launch per output (q, k):
//   blocks over tiles of tokens (x batch) -> cos/sin of the tile's tokens,
//   once per (token, pair), into shared memory by the block's threads
//   -> threads over (pair chunk, head, token): each thread copies its
//   chunk's cos/sin into registers, then loops over its share of the
//   heads, both members of a pair in registers before either is stored
//   (in place is correct).
// A chunk is one 16-byte vector of the dense head dim (4 f32 or 8 f16/bf16
// per member when half-split; 2 or 4 pairs when interleaved), so loads and
// stores are as wide as the GPU offers.
// Untuned: no GPU was available when this was written (Vulkan runs on
// lavapipe, a CPU; the CUDA variant is only compiled and its PTX checked by
// ptxas); the choices are the usual ones for a memory-bound elementwise
// kernel: 128-256 threads, coalesced 16-byte accesses, no repeated
// transcendental work.
// Halide 21's Vulkan backend constrains the Vulkan variant (each measured
// on lavapipe): no nested serial loops in kernels (heads beyond a block's
// go to more blocks; one loop at a time is right: dL/d(inv_freq)'s sums),
// no vector shuffles (interleaved pairings stay scalar), no
// 4-wide vector loads from shared memory (hence the register copy), shared
// memory of constant size, one token row per block with xPos, no serial
// launch loop around the blocks (grid limits are the runtime's job:
// runtime/device_call.h splits calls), no compute_with (k is its own
// launch on both APIs).
#include <algorithm>

#include "schedule.h"

namespace ropegen::targets {
namespace {

using namespace Halide;

// Threads per block: Vulkan guarantees only 128 invocations per workgroup.
int thread_budget(const Target& t) { return t.has_feature(Target::Vulkan) ? 128 : 256; }

// cos/sin (and the xPos scale) of one tile live in shared memory: Vulkan
// guarantees 16 KiB.
constexpr int kSharedBytes = 16384;

int largest_pow2_at_most(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Largest power of two <= limit that divides n (n is a compile-time
// constant, so chunks have no tail and vector accesses stay unpredicated).
int lanes_dividing(int n, int limit) {
  int l = 1;
  while (l * 2 <= limit && n % (l * 2) == 0) l *= 2;
  return l;
}

struct GpuShape {
  int pairs_per_chunk;   // vector width in pairs
  int chunk_threads;     // threads over chunks (the rest: serial loop or more blocks)
  int head_threads;      // threads over heads (the rest: serial loop or more blocks)
  int tokens;            // tokens per block, one thread row each
  bool shared_cos_sin;   // false: huge head dims, cos/sin in registers per thread
  // CUDA: each thread loops over the rest of the heads (and chunks), so a
  // token's cos/sin is computed once for all heads. Vulkan: no serial loop
  // in a kernel at all (Halide 21's SPIR-V for nested loops skips
  // iterations, measured on lavapipe): the rest of the heads go to more
  // blocks, each computing the cos/sin of its tile for its group of heads.
  bool serial_loops;
};

GpuShape gpu_shape(const RopeSpec& spec, const Target& target) {
  GpuShape g{};
  const bool vulkan = target.has_feature(Target::Vulkan);
  const int vector_elems = 16 / (spec.dtype == DType::F32 ? 4 : 2);
  const bool interleaved = spec.output_pairing == Pairing::Interleaved;
  const bool any_interleaved = interleaved || spec.pairing == Pairing::Interleaved;
  const int half = spec.num_pairs();
  // Interleaved members are vectors of stride 2: shuffles, which Halide
  // 21's Vulkan backend emits as invalid SPIR-V.
  const bool vectorize = !(any_interleaved && vulkan);
  g.pairs_per_chunk = vectorize ? lanes_dividing(half, interleaved ? vector_elems / 2 : vector_elems) : 1;
  const int budget = thread_budget(target);
  g.chunk_threads = std::min(half / g.pairs_per_chunk, budget);
  const int pow2_chunk_threads = largest_pow2_at_most(g.chunk_threads);
  const int cos_sin_bytes = half * 8 + (spec.xpos.enabled ? half * 4 : 0);  // per token
  g.shared_cos_sin = cos_sin_bytes <= kSharedBytes;
  // Heads share a token's cos/sin through shared memory; without it, one
  // thread does every head of its chunk and reuses cos/sin from registers.
  g.head_threads = g.shared_cos_sin ? std::clamp(budget / pow2_chunk_threads, 1, 8) : 1;
  const int room = std::max(1, budget / (pow2_chunk_threads * g.head_threads));
  g.tokens = g.shared_cos_sin ? largest_pow2_at_most(std::clamp(std::min(room, kSharedBytes / cos_sin_bytes), 1, 8)) : 1;
  // With xPos, Vulkan kernels with several token rows per block write
  // nothing on lavapipe (cause not found; one row per block is right).
  if (vulkan && spec.xpos.enabled) g.tokens = 1;
  g.serial_loops = !vulkan;
  return g;
}

// The loops of an output the per-token stages are placed at.
struct Loops {
  Var block;     // innermost block loop: one tile of tokens
  Var per_head;  // one thread, one chunk, before its heads: cos/sin in registers here
  Var per_row;   // one thread, one chunk of one head: the register stage here
};

// Rows (dims past the head dim) start at multiples of `elems`, so chunks
// of a rotary range that starts at one are whole aligned vectors: 16-byte
// loads and stores (PTX ld/st.v4) instead of four each. The runtime's
// staged buffers pad rows to 16 bytes (runtime/device_call.h).
void promise_aligned_rows(const lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, int elems) {
  auto multiple = [&](const Expr& stride) { return (stride / elems) * elems; };
  t.input.dim(0).set_min(0);
  for (int d = 1; d < 4; ++d) t.input.dim(d).set_stride(multiple(t.input.dim(d).stride()));
  for (int d = 2; d < 5; ++d) t.output.output_buffer().dim(d).set_stride(multiple(t.output.output_buffer().dim(d).stride()));
}

// out: (r, m, h, s, b) half-split or (m, r, h, s, b) interleaved.
Loops schedule_output(const lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, const GpuShape& g,
                      const RopeSpec& spec) {
  Var ri("ri"), ro("ro"), rs("rs"), ho("ho"), hi("hi"), si("si"), block("block"), mr("mr"), group("group");
  Func out = t.output;
  out.split(a.r, ro, ri, g.pairs_per_chunk, TailStrategy::GuardWithIf)
      .split(ro, rs, ro, g.chunk_threads, TailStrategy::GuardWithIf)
      .split(a.h, ho, hi, g.head_threads, TailStrategy::GuardWithIf)
      .split(a.s, block, si, g.tokens, TailStrategy::GuardWithIf);
  // Innermost first: the chunk's vector (both members), [the thread's
  // serial loops over heads and chunks,] the thread loops, the block loops.
  const bool interleaved = spec.output_pairing == Pairing::Interleaved;
  std::vector<VarOrRVar> order;
  if (interleaved) order = {a.m, ri};
  else order = {ri, a.m};
  if (g.serial_loops) order.insert(order.end(), {ho, rs, ro, hi, si, block, a.b});
  else order.insert(order.end(), {ro, hi, si, block, rs, ho, a.b});
  out.reorder(order);
  if (interleaved && g.pairs_per_chunk > 1) {
    out.fuse(a.m, ri, mr).vectorize(mr);
    t.rotated.reorder_storage(a.m, a.r);  // the members of a chunk are one dense vector in registers
  } else if (interleaved) {
    out.unroll(a.m);
  } else {
    out.vectorize(ri).unroll(a.m);
  }
  if (g.pairs_per_chunk > 1) promise_aligned_rows(a, t, interleaved ? 2 * g.pairs_per_chunk : g.pairs_per_chunk);
  out.gpu_threads(ro, hi, si);
  if (g.serial_loops) {
    out.gpu_blocks(block, a.b);
  } else {
    out.fuse(rs, ho, group).gpu_blocks(block, group, a.b);
  }
  const Loops loops = g.serial_loops ? Loops{block, rs, ho} : Loops{block, ro, ro};
  // Both members of the chunk's pairs are computed into registers before
  // either is stored.
  t.rotated.compute_at(out, loops.per_row).vectorize(a.r, g.pairs_per_chunk, TailStrategy::GuardWithIf).unroll(a.m);
  return loops;
}

// cos/sin (or the xPos scale) of the block's tokens in shared memory, each
// (token, pair) computed once per block, by the block's threads as the
// output uses them: pairs over the first two thread dims, tokens on the
// third. Returns the innermost loop (one pair of one token).
Var schedule_per_tile(Func f, const lowering::RopeAlgorithm& a, Func out, const Loops& loops, const GpuShape& g) {
  Var rx("rx"), ry("ry"), rs("rs");
  f.compute_at(out, loops.block)
      .bound_storage(a.s, g.tokens)  // a constant size: dynamic shared memory misbehaves on Vulkan
      .split(a.r, rs, rx, g.chunk_threads, TailStrategy::GuardWithIf)
      .split(rs, rs, ry, g.head_threads, TailStrategy::GuardWithIf)
      .reorder(rs, rx, ry, a.s, a.b)
      .gpu_threads(rx, ry, a.s);
  if (!g.serial_loops) f.unroll(rs);  // a few pairs per thread
  return rs;
}

// Huge head dims: cos/sin of the thread's chunk and token, in registers,
// reused over every head the thread loops through.
Var schedule_per_thread(Func f, const lowering::RopeAlgorithm& a, Func out, const Loops& loops) {
  f.compute_at(out, loops.per_head).unroll(a.r);
  return a.r;
}

// One output's launch and the per-token stages it reads.
void schedule_tensor(const lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, Func cos_sin, Func reduced, Func xpos,
                     const GpuShape& g, const RopeSpec& spec) {
  const Loops loops = schedule_output(a, t, g, spec);
  // reduced is undefined when cos/sin are read from a cache (scheme table).
  if (!g.shared_cos_sin) {
    const Var at = schedule_per_thread(cos_sin, a, t.output, loops);
    if (reduced.defined()) reduced.compute_at(cos_sin, at);
    if (xpos.defined()) schedule_per_thread(xpos, a, t.output, loops);
    return;
  }
  const Var at = schedule_per_tile(cos_sin, a, t.output, loops, g);
  if (reduced.defined()) reduced.compute_at(cos_sin, at);  // once for sin and cos
  if (xpos.defined()) schedule_per_tile(xpos, a, t.output, loops, g);
  // Each thread copies its chunk's cos/sin from shared memory into
  // registers once and reuses them for all its heads (which also keeps
  // vector loads away from shared memory, see the top).
  cos_sin.in(t.rotated).compute_at(t.output, loops.per_head).unroll(a.r);
  if (xpos.defined()) xpos.in(t.rotated).compute_at(t.output, loops.per_head).unroll(a.r);
}

// qk_norm: one thread per row (head, token), threads along heads, blocks
// over (token, head group, batch): the thread adds its row's squares, then
// rotates its pairs (cos/sin per pair, in registers), then stores the whole
// row; three loops one after another, none nested (see the top). The row
// is read whole before any of it is stored: in place is correct.
// Untuned (no GPU here): a row per thread leaves the accesses uncoalesced.
void schedule_whole_row(const lowering::RopeAlgorithm& a, lowering::RotatedTensor& t, Func cos_sin, Func xpos) {
  Var ho("ho"), hi("hi");
  Func out = t.output;
  out.split(a.h, ho, hi, 32, TailStrategy::GuardWithIf).reorder(a.d, hi, ho, a.s, a.b).gpu_threads(hi).gpu_blocks(a.s, ho, a.b);
  if (t.inv_rms.defined()) {  // qk_norm (fp8 outputs without it: the rotation and the stores)
    t.square_sums.compute_at(out, hi).unroll(a.d).update(0).unroll(a.d);
    t.inv_rms.compute_at(out, hi);
  }
  t.rotated.compute_at(out, hi).unroll(a.m);
  if (t.group_scales.defined()) t.group_scales.compute_at(out, hi);  // output_quant: after the row's rotation
  cos_sin.compute_at(t.rotated, a.r);
  if (xpos.defined()) xpos.compute_at(t.rotated, a.r);
  // The backward: the row's dL/d(normed) (per thread), then its sums of
  // g . x, then the stores.
  if (t.normed_gradient.defined()) {
    t.normed_gradient.compute_at(out, hi);
    t.dot_sums.compute_at(out, hi).unroll(a.d).update(0).unroll(a.d);
    t.norm_coefficient.compute_at(out, hi);
  }
}

// output_quant's out_scales: a launch of its own, a row per thread as q's,
// with its own rotation and cos/sin (per pair, in registers). Untuned.
void schedule_output_scales(lowering::RopeAlgorithm& a) {
  Func out = a.q.out_scales;
  if (!out.defined()) return;
  Var ho("ho"), hi("hi");
  out.split(a.h, ho, hi, 32, TailStrategy::GuardWithIf)
      .reorder(a.d, hi, ho, a.s, a.b)
      .gpu_threads(hi)
      .gpu_blocks(a.s, ho, a.b);
  a.q.scales_rotated.compute_at(out, hi).unroll(a.m);
  lowering::CosSinStages own = a.output_scales;  // Funcs are handles: scheduling a copy schedules them
  own.cos_sin.compute_at(a.q.scales_rotated, a.r);
  if (own.xpos_scale.defined()) own.xpos_scale.compute_at(a.q.scales_rotated, a.r);
}

}  // namespace

// A sum over tokens (lowering/token_sum.h) on the device: one fixed order
// of float64 additions, so the host's bits, run after run; no atomics,
// which Halide 21's Vulkan backend does not have. One launch per level:
// one thread per entry (index i, token or group), threads along i, blocks
// over (entry, i chunk, batch) as the rotation's (tokens on the grid dim
// the runtime splits calls along); each thread adds its entry in
// registers, one RDom loop after another, never nested (see the top).
// The output (float32 of the sum) one thread per entry too, the sum in
// its thread. Returns level 0's launch, whose thread's loop is `ri`.
Func schedule_token_sum(const lowering::TokenSum& sums, Func output, const Var& i, const Var& ri, int threads) {
  Var io("io");
  Func first;
  for (size_t n = 0; n < sums.levels.size(); ++n) {
    Func level = sums.levels[n];
    Func launch = level.in();
    const std::vector<Var> args = level.args();  // (i, s, b)
    // Stored in rows of 32 entries (256 bytes): sized otherwise, these
    // buffers gave zeros for dL/d(inv_freq) of a later pipeline (lavapipe:
    // an xPos spec run after one without, each right alone), Halide 21's
    // Vulkan allocator again (runtime/device_call.h).
    launch.compute_root()
        .align_storage(i, 32)
        .split(i, io, ri, threads, TailStrategy::GuardWithIf)
        .reorder(ri, args[1], io, args[2])
        .gpu_threads(ri)
        .gpu_blocks(args[1], io, args[2]);
    level.compute_at(launch, ri);
    if (n == 0) first = launch;
  }
  output.split(i, io, ri, threads, TailStrategy::GuardWithIf).gpu_threads(ri).gpu_blocks(io);
  Func(sums.sum).compute_at(output, ri);
  return first;
}

// dL/d(inv_freq): a token sum along pairs; level 0's thread computes its
// token's cos/sin (and xPos scales) once for every head of q and k.
void schedule_frequency_gradient(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  if (!a.gradient.d_freqs.defined()) return;
  const int threads = std::min(largest_pow2_at_most(spec.num_pairs()), thread_budget(target));
  Var ri("ri");
  const Func first = schedule_token_sum(a.gradient.sums, a.gradient.d_freqs, a.r, ri, threads);
  for (Func f : {a.gradient.cos_sin, a.gradient.reduced, a.gradient.xpos_scale})
    if (f.defined()) f.compute_at(first, ri);
}

// dL/d(qk_norm weights) on the device, as dL/d(inv_freq): one launch per
// level, one thread per (dim, token or group); level 0's thread takes the
// token's heads in turn, each head's sums of squares, 1 / rms and rotated
// pair computed in its registers (again per dim: untuned, no GPU here),
// its cos/sin once. k's sum reads its own clones of the cos/sin stages
// (one Func cannot be placed in two launches).
void schedule_norm_weight_gradients(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  if (!a.q.weight_gradient.d_weight.defined()) return;
  const int threads = std::min(largest_pow2_at_most(spec.head_dim), thread_budget(target));
  for (lowering::RotatedTensor* t : {&a.q, &a.k}) {
    lowering::WeightGradient& g = t->weight_gradient;
    if (!g.d_weight.defined()) continue;
    Func cos_sin = a.norm_gradient.cos_sin, reduced = a.norm_gradient.reduced, xpos = a.norm_gradient.xpos_scale;
    if (t == &a.k) {
      cos_sin = cos_sin.clone_in(g.rotated);
      if (reduced.defined()) reduced = reduced.clone_in(cos_sin);
      if (xpos.defined()) xpos = xpos.clone_in(g.rotated);
    }
    Var ri("ri");
    const Func first = schedule_token_sum(g.sums, g.d_weight, a.d, ri, threads);
    for (Func f : {cos_sin, reduced, xpos})
      if (f.defined()) f.compute_at(first, ri);
    Func token = g.sums.levels[0];
    const RVar head = g.heads.x;
    g.square_sums.compute_at(token, head).unroll(a.d).update(0).unroll(a.d);
    g.inv_rms.compute_at(token, head);
    g.rotated.compute_at(token, head).unroll(a.m);
  }
}

// Frequencies computed on the host, once per call: those of the dynamic
// NTK scaling, a float64 pow of the call's seq_len (Vulkan has no float64
// pow, and CUDA's need not round as the host's); they read no tensor. All
// others (a table, or the call's inv_freq: a tensor, maybe device-only)
// are split for the angle reduction on the device, in a launch of their
// own. Inline in the kernels that read them, as a few float64 operations
// per thread, lavapipe returned zeros for dL/d(inv_freq) of an xPos spec
// after a few dozen other kernels had run (the backward sweep of
// tests/kernels; each kernel alone was right; cause not found).
bool frequencies_on_host(const RopeSpec& spec) { return spec.scaling.type == ScalingType::Dynamic; }

void schedule_rope_gpu(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  const GpuShape g = gpu_shape(spec, target);
  // Over a multiple of 32 pairs, as far as the tables it reads are padded
  // (lowering/constant_table.h: Halide 21's Vulkan allocator). Undefined
  // when cos/sin are read from a cache (scheme table).
  const int padded_pairs = (spec.num_pairs() + 31) / 32 * 32;
  if (a.quarter_turns.defined()) {
    a.quarter_turns.compute_root().bound(a.r, 0, padded_pairs);
    if (frequencies_on_host(spec)) {
      a.inv_freq.compute_root().bound(a.r, 0, padded_pairs);
    } else {
      Var ro("ro"), ri("ri");
      a.quarter_turns.split(a.r, ro, ri, 32).gpu_threads(ri).gpu_blocks(ro);
    }
  }
  schedule_frequency_gradient(a, spec, target);
  schedule_norm_weight_gradients(a, spec, target);
  // k is its own launch with its own cos/sin: fusing it into q's launch
  // (compute_with) to share them fails in Halide 21's lowering ("every
  // name is unique"). Cloned before any wrapper exists.
  Func cs_k, reduced_k, xpos_k;
  if (a.variant.with_k) {
    cs_k = a.cos_sin.clone_in(a.k.rotated);
    if (a.reduced.defined()) reduced_k = a.reduced.clone_in(cs_k);
    if (a.xpos_scale.defined()) xpos_k = a.xpos_scale.clone_in(a.k.rotated);
  }
  // The cache rows' rotation has its own cos/sin stages (scheduled_algorithm
  // asks lowering for them), computed per element (inline): cheap next to
  // the scattered store. (Cloning q's into it next to out_k's clone fails
  // in Halide 21's lowering.)
  if (a.whole_rows) {
    schedule_whole_row(a, a.q, a.cos_sin, a.xpos_scale);
    if (a.variant.with_k) schedule_whole_row(a, a.k, cs_k, xpos_k);
    schedule_output_scales(a);
  } else {
    schedule_tensor(a, a.q, a.cos_sin, a.reduced, a.xpos_scale, g, spec);
    if (a.variant.with_k) schedule_tensor(a, a.k, cs_k, reduced_k, xpos_k, g, spec);
  }
  // Scatters: 32 threads along a row's dims (k's rotary update: pairs),
  // blocks over (dim chunk x member x head, token) as
  // schedule_pass_through_gpu copies; no serial loop in the kernel (Vulkan,
  // see the top). k's rotation and its cos/sin are computed per element
  // (inline): cheap next to the scattered store, as is each token's target
  // (lowering's kv_target, its index checks). Each entry of a host call
  // takes at most one token (prepare_call), so the threads' writes never
  // meet; a device call's duplicates race (lowering/README.md).
  auto scatter = [](Stage stage, const RVar& inner, std::vector<RVar> across, const RVar& token) {
    RVar ds("ds"), dt("dt");
    stage.allow_race_conditions().split(inner, ds, dt, 32, TailStrategy::GuardWithIf);
    RVar blocks = ds;
    for (const RVar& r : across) {
      RVar fused(blocks.name() + "f");
      stage.fuse(blocks, r, fused);
      blocks = fused;
    }
    stage.gpu_threads(dt).gpu_blocks(blocks, token);
  };
  // The caches' pure definitions (undef: no store) are placed on the device
  // too: left on the host, Halide 21 counts them as host accesses of the
  // caller's caches (its image checks run before undefined stores are
  // removed), and a device-resident cache (no host pointer) fails the call.
  // No kernel results from them.
  if (a.kv.k_cache.defined()) {
    // qk_norm: k's 1 / rms in a launch of its own, one thread per row, read
    // by out_k's launch and the scatters.
    if (a.k.inv_rms.defined()) {
      Var ho("ho"), hi("hi");
      a.k.inv_rms.compute_root().split(a.h, ho, hi, 32, TailStrategy::GuardWithIf).reorder(hi, ho, a.s, a.b)
          .gpu_threads(hi).gpu_blocks(a.s, ho, a.b);
      a.k.square_sums.compute_at(a.k.inv_rms, hi).unroll(a.d).update(0).unroll(a.d);
    }
    a.kv.k_cache.gpu_single_thread();
    const RDom& k = a.kv.k_rows;
    scatter(a.kv.k_cache.update(0), k.x, {k.y, k.z}, k.w);
    if (a.kv.k_pass_rows.defined())
      scatter(a.kv.k_cache.update(1), a.kv.k_pass_rows.x, {a.kv.k_pass_rows.y}, a.kv.k_pass_rows.z);
  }
  if (a.kv.v_cache.defined()) {
    a.kv.v_cache.gpu_single_thread();
    scatter(a.kv.v_cache.update(0), a.kv.v_rows.x, {a.kv.v_rows.y}, a.kv.v_rows.z);
  }
}

// Sinusoidal, learned, ALiBi: one thread per element of a row chunk,
// blocks over (token, chunk x head, batch) — tokens on the grid dim the
// runtime splits calls along (runtime/device_call.h). Sinusoidal PE is
// computed per block, each column once (exact cos/sin at its 16-position
// block start and the angle addition): cheap next to a memory access.
void schedule_encoding_gpu(lowering::RopeAlgorithm& a, const RopeSpec& spec, const Target& target) {
  Var dt("dt"), ds("ds"), dh("dh");
  a.q.output.split(a.d, ds, dt, thread_budget(target), TailStrategy::GuardWithIf)
      .reorder(dt, ds, a.h, a.s, a.b)
      .fuse(ds, a.h, dh)
      .gpu_threads(dt)
      .gpu_blocks(a.s, dh, a.b);
  // See schedule_rope_gpu: the table over a padded range, on the host
  // (sinusoidal's frequencies are by column).
  const int padded_columns = (spec.dim + 31) / 32 * 32;
  if (a.inv_freq.defined()) a.inv_freq.compute_root().bound(a.r, 0, padded_columns);
  if (a.quarter_turns.defined()) a.quarter_turns.compute_root().bound(a.r, 0, padded_columns);
  // Sinusoidal PE (u cd + v sd) per block, in its memory, before x + PE:
  // inline, lavapipe computed x + (u cd + v sd) as (x + u cd) + v sd (Halide
  // 21's SPIR-V has no NoContraction: strict_float is not kept), 1 ulp off
  // the host's.
  if (spec.encoding == Encoding::Sinusoidal) {
    Var rt("rt"), rs("rs");
    a.cos_sin.compute_at(a.q.output, dh).split(a.r, rs, rt, thread_budget(target), TailStrategy::GuardWithIf).gpu_threads(rt);
  }
}

void schedule_pass_through_gpu(lowering::PassThroughCopy& c, const RopeSpec& spec, const Target& target) {
  // A plain copy: 32 threads along the dims, blocks over (head, token,
  // batch). (Threads over two dims with guards on both are miscompiled by
  // Halide 21's Vulkan backend: rows of other tokens get copied.)
  Var dt("dt"), ds("ds");
  c.output.split(c.d, ds, dt, 32, TailStrategy::GuardWithIf)
      .reorder(ds, dt, c.h, c.s, c.b)
      .gpu_threads(dt)
      .gpu_blocks(c.h, c.s, c.b);
}

}  // namespace ropegen::targets
