// The algorithms as Halide Funcs — what is computed, never how (the
// schedules live in targets/). Tensors are seen logically as (d, h, s, b):
// head dim (dense), head, token, batch; every layout maps onto that with
// strides, so one algorithm serves bshd, bhsd, sbhd and thd (B = 1). The
// single-tensor encodings use the same view: sinusoidal and learned x as
// (d, 1, s, b), ALiBi scores [B, H, Sq, Sk] as (key, head, query, batch).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <Halide.h>

#include "lowering/storage.h"
#include "ropegen/call.h"
#include "ropegen/spec.h"

namespace ropegen::lowering {

// What varies between kernels of one spec (ropegen/call.h): k or not, the
// ids' width, forward or backward (rope: dL/dq (, dL/dk) from the upstream
// gradients in q (, k), the rotation by -angle; with run-time frequencies
// also dL/d(inv_freq)).
using KernelVariant = ropegen::KernelVariant;
inline Halide::Type position_type(const KernelVariant& v) {
  return v.position_type == IdType::Int64 ? Halide::Int(64) : Halide::Int(32);
}

// The spec a kernel is laid out by: a backward kernel reads the gradient
// where the forward wrote (output_pairing) and writes where it read
// (pairing). Schedules and argument binding use this one.
RopeSpec kernel_spec(const RopeSpec& spec, const KernelVariant& variant);

// The (d, h, s, b) layout a kernel's tensor is in (call/layout_traits.h):
// bsd, sbd and td are bshd, sbhd and thd with one head; ALiBi's scores
// [B, H, Sq, Sk] are bhsd (keys dense, query rows as tokens).
Layout kernel_layout(const RopeSpec& spec);

// One rotated tensor (q or k): its input and the stages the schedule places.
// The output is the rotary part only, as a strided view the runtime builds:
// half (output) pairing (r, m, h, s, b) with m's stride rotary_dim/2;
// interleaved (m, r, h, s, b) with r's stride 2 — dim 0 is dense either way. Dims
// outside the rotary range are never written (see PassThroughCopy).
struct RotatedTensor {
  Halide::ImageParam input;  // (d, h, s, b), the whole head
  Halide::Func rotated;      // (r, m, h, s, b): member m of pair r, float32
  Halide::Func output;       // rotary view, spec dtype
  Halide::ImageParam saved;  // backward with run-time frequencies: the forward input
};

struct RopeAlgorithm {
  Halide::Var d{"d"}, h{"h"}, s{"s"}, b{"b"}, r{"r"}, m{"m"};

  // Run-time arguments (only those the spec needs appear in arguments()).
  Halide::ImageParam positions;   // (s, b) explicit position ids; multi-axis: (axis, s, b)
  Halide::ImageParam cu_seqlens;  // (n + 1) thd sequence starts, int32
  Halide::ImageParam table;       // learned: (d, position) rows to add, spec dtype
  Halide::ImageParam freqs;       // frequency scheme runtime: (r) inv_freq, float32
  // frequency scheme table: (c, position), float32; row p = [cos of the
  // pairs | their sin] at position p, any attention factor included.
  Halide::ImageParam cos_sin_cache;
  Halide::Param<int64_t> offset{"offset", 0};
  Halide::Param<int64_t> seq_len{"seq_len", 1};
  // Threads of the Halide thread pool that runs the kernel (from that
  // runtime, not the call): a CPU schedule sizes its parallel tasks by it.
  // Results never depend on it.
  Halide::Param<int64_t> pool_threads{"pool_threads", 1};

  Halide::Func position;      // (r, s, b) float64: the position pair r of token (s, b) is rotated by
  // Computed frequencies only (undefined with scheme table):
  Halide::Func inv_freq;      // (r) float64, after scaling
  Halide::Func reduced;       // (r, s, b) -> {angle mod pi/2 (float32), quadrant}
  // RoPE reduces the angle in 32-bit fixed point (lowering/trig.h,
  // reduce_angle_fixed) from these two; without them (the other
  // encodings) `reduced` is the float64 reduction of position * inv_freq.
  Halide::Func position_id;    // (r, s, b) the position as an integer (int32 or int64)
  Halide::Func quarter_turns;  // (r): quarter_turns_split(inv_freq)
  Halide::Func cos_sin;       // (r, s, b) -> {cos, sin} * attention factor, float32 (scheme table: read from the cache);
                              // sinusoidal: (column, s, b) -> the PE value
  // Sinusoidal with implicit positions (unpacked): (r, block) -> {cos, sin}
  // at the start of the offset's block + block (16 positions each), whose
  // `reduced` is then (r, block); undefined otherwise.
  Halide::Func cos_sin_base;
  // Sinusoidal with implicit positions (unpacked): (column, s) the PE row of
  // position offset + s, read when batch_shares_pe_rows (x has more than
  // one sequence) is true; undefined otherwise.
  Halide::Func pe_rows;
  Halide::Expr batch_shares_pe_rows;
  Halide::Func xpos_scale;    // (r, s, b) -> {query scale s_r^p, key scale s_r^-p}; undefined without xPos

  // q, k for rope; q alone holds the single tensor of the other encodings
  // (input "x", output "out_x": (d, h, s, b) in the spec's dtype).
  RotatedTensor q, k;         // k.output is undefined unless the variant has k
  // Fused KV-cache append (spec kv_cache): k's rows (rotary dims rotated,
  // the rest copied) and v's rows scattered into the caches, (d, h, e, pg)
  // = (dim, head, entry, page) in every layout (contiguous: slots are
  // pages of one entry). The caches' pure definitions are undef (no entry
  // is written but the tokens'). k_cache update 0: rotated k over k_rows
  // (r, m, h, token); update 1 (partial rotary): the other dims over
  // k_pass_rows (j, h, token); v_cache update 0: v over v_rows (d, h,
  // token). where() keeps the appended tokens.
  Halide::Var e{"e"}, pg{"pg"};
  Halide::ImageParam v;                                    // (d, h, s, b), spec dtype
  Halide::ImageParam kv_indices, kv_indptr, batch_indices;  // paged, int32
  Halide::ImageParam cache_positions;  // paged, int32 (t): each token's position in its request's pages
  Halide::ImageParam slot_mapping;                         // contiguous, int32
  // fp8 caches (kv_cache dtype fp8_*): the call's per-tensor scales; the
  // caches hold codes of x / scale (fp8.h, fp8_from_float).
  Halide::Param<float> k_scale{"k_scale", 1.0f}, v_scale{"v_scale", 1.0f};
  // k's rotation for the cache (as rotated), and with own_cache_stages
  // (build_algorithm) its own copies of cos_sin, reduced, xpos_scale;
  // without, these are undefined and it reads q's.
  Halide::Func kv_rotated_k, kv_cos_sin, kv_reduced, kv_xpos_scale;
  // (t) -> {entry, page} token t goes to, page -1 when it is not appended
  // (a negative batch index or slot, or ids that name no entry of the cache).
  Halide::Func kv_target;
  Halide::Func k_cache, v_cache;
  Halide::RDom k_rows, k_pass_rows, v_rows;
  bool uses_page_table = false, uses_slot_mapping = false, uses_k_scale = false, uses_v_scale = false;
  // dL/d(inv_freq), backward with run-time frequencies: a sum over every
  // row of q and k in one fixed order of float64 additions, the same on
  // every target (so the same bits everywhere, run after run) and made of
  // stages a schedule can compute in parallel (a GPU's on the device):
  // level 0 (r, s, b): token (s, b)'s terms (position x dL/dangle of pair
  // r), q's heads then k's; level l (r, g, b): entries [g x kGradientGroup,
  // + kGradientGroup) of level l - 1 along s (tokens from q's min s, then
  // groups from 0); d_freqs_sum (r): every entry of the last level, s
  // inner, b outer. Each is a pure 0 and one update per summed RDom.
  static constexpr int kGradientGroup = 64, kGradientLevels = 2;
  std::vector<Halide::Func> d_freqs_levels;  // 1 + kGradientLevels Funcs
  Halide::Func d_freqs_sum;  // (r) float64
  Halide::Func d_freqs;      // (r) float32, the output
  // The gradient's own copies of the per-(pair, token) stages, for the
  // schedules to place at level 0's tokens (the forward's are placed in the
  // rotation's loops). xpos_scale: undefined without xPos.
  Halide::Func d_freqs_reduced, d_freqs_cos_sin, d_freqs_xpos_scale;
  KernelVariant variant;
  // Which run-time arguments the spec reads; arguments() lists exactly these.
  bool uses_positions = false, uses_cu_seqlens = false, uses_offset = false, uses_seq_len = false;
  bool uses_pool_threads = false;  // set by the schedule that reads pool_threads
  bool uses_table = false, uses_freqs = false, uses_cos_sin_cache = false;
  // Positions, and so cos/sin (xPos scales, sinusoidal PE), are the same for
  // every sequence of the call (implicit positions, unpacked layouts: offset
  // + s; set by define_positions): RoPE's rotations read cos/sin at b = 0,
  // so a schedule's tile of several sequences computes them once for all.
  bool cos_sin_shared_by_batch = false;

  std::vector<Halide::Argument> arguments() const;
  std::vector<Halide::Func> outputs() const;
};

// Copies the dims outside the rotary range for out-of-place calls on a
// partial-rotary spec: output(d, h, s, b) = input(d, h, s, b) on a view of one range.
struct PassThroughCopy {
  Halide::ImageParam input;
  Halide::Func output;
  Halide::Var d{"d"}, h{"h"}, s{"s"}, b{"b"};
};
PassThroughCopy build_pass_through_copy(const RopeSpec& spec);

// Builds the spec's algorithm (any encoding); every constant comes from rope_math.
// own_cache_stages: the KV-cache rows' rotation gets its own cos/sin (and
// xPos) stages instead of reading q's (GPU schedules: one launch per
// output, each computing its own).
RopeAlgorithm build_algorithm(const RopeSpec& spec, const KernelVariant& variant, bool own_cache_stages = false);

// The parts shared by the encodings' builders (rope_algorithm.cpp).
namespace detail {
// a.position (float64) and a.position_id (the integer id) of token (s, b)
// on axis `axis`: explicit ids, or offset + index (thd / td: restarting at
// every cu_seqlens start). Sets uses_*.
void define_positions(const RopeSpec& spec, RopeAlgorithm& a, const Halide::Expr& axis);
// reduced and cos_sin Funcs (times `attention`) from a.position_id and
// a.quarter_turns (the fixed-point reduction) where defined, else from
// a.position and a.inv_freq, named with `prefix`; define_cos_sin sets
// a.reduced, a.cos_sin.
std::pair<Halide::Func, Halide::Func> cos_sin_stages(const RopeAlgorithm& a, float attention, const std::string& prefix);
void define_cos_sin(RopeAlgorithm& a, float attention);
// The row of `table` (its dim 1: a cos/sin cache, a learned table) that
// position id `id` names, clamped into the table in the id's own type: no
// id reads outside it (ids the call could not check, on a device: see
// README.md), and bounds inference sees the rows a data-dependent id may reach.
Halide::Expr table_row(const Halide::Expr& id, const Halide::ImageParam& table);
RopeAlgorithm build_sinusoidal_or_learned(const RopeSpec& spec, const KernelVariant& variant);
RopeAlgorithm build_alibi(const RopeSpec& spec, const KernelVariant& variant);
}  // namespace detail

}  // namespace ropegen::lowering
