// The algorithms as Halide Funcs — what is computed, never how (the
// schedules live in targets/). Tensors are seen logically as (d, h, s, b):
// head dim (dense), head, token, batch; every layout maps onto that with
// strides (abi/kernel_abi.h), so one algorithm serves bshd, bhsd, sbhd and
// thd (B = 1). The single-tensor encodings use the same view: sinusoidal
// and learned x as (d, 1, s, b), ALiBi scores [B, H, Sq, Sk] as (key,
// head, query, batch).
//
// One file per feature: positions (ids, offset + index, cu_seqlens),
// cos_sin (frequencies, the exact angle reduction, cos/sin from a cache,
// xPos), rotation (q and k), kv_append (the fused KV-cache append),
// frequency_gradient (dL/d(inv_freq)); additive_algorithm and
// alibi_algorithm for the other encodings.
#pragma once

#include <Halide.h>

#include <bitset>
#include <string>
#include <utility>
#include <vector>

#include "abi/arguments.h"
#include "lowering/cos_sin.h"
#include "lowering/frequency_gradient.h"
#include "lowering/kv_append.h"
#include "lowering/storage.h"
#include "lowering/token_sum.h"
#include "ropegen/call.h"
#include "ropegen/spec.h"

namespace ropegen::lowering {

using abi::Arg;

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
// (pairing): abi::kernel_pairing. Schedules and argument binding use this one.
RopeSpec kernel_spec(const RopeSpec& spec, const KernelVariant& variant);

// The (d, h, s, b) layout a kernel's tensor is in (abi::LayoutTraits):
// bsd, sbd and td are bshd, sbhd and thd with one head; ALiBi's scores
// [B, H, Sq, Sk] are bhsd (keys dense, query rows as tokens).
Layout kernel_layout(const RopeSpec& spec);

// dL/d(qk_norm's weight) of one tensor: its own copies of the rotation back,
// the sums of squares and 1 / rms; level 0's RDom over heads; the sum over
// tokens (token_sum.h); the output (d) float32.
struct WeightGradient {
  Halide::Func rotated, square_sums, inv_rms;
  Halide::RDom heads;
  TokenSum sums;
  Halide::Func d_weight;
};

// One rotated tensor (q or k): its input and the stages the schedule places.
// Without qk_norm the output is the rotary part only, as a strided view the runtime builds
// (abi::rotary_view): half (output) pairing (r, m, h, s, b) with m's stride
// rotary_dim/2; interleaved (m, r, h, s, b) with r's stride 2 — dim 0 is
// dense either way. Dims outside the rotary range are never written (see
// PassThroughCopy).
struct RotatedTensor {
  Halide::ImageParam input;  // (d, h, s, b), the whole head: the algorithm's input q or k
  Halide::Func rotated;      // (r, m, h, s, b): member m of pair r, float32
  Halide::Func output;       // rotary view, spec dtype
  Halide::ImageParam saved;  // backward with run-time frequencies or qk_norm:
                             // the forward input (saved_q, saved_k)
  // qk_norm (qk_norm.h): the rotation reads `normed` and the output is the
  // whole row (d, h, s, b); undefined otherwise.
  Halide::Func square_sums;  // (j, h, s, b) float64 partial sums of squares
  Halide::Func inv_rms;      // (h, s, b) float32 1 / rms
  Halide::Func normed;       // (d, h, s, b) float32
  // Its backward: dL/d(normed) (d, h, s, b) float32, the float64 partial
  // sums of g . x (j, h, s, b), and -(g . x) / (head_dim rms^2) (h, s, b).
  Halide::Func normed_gradient, dot_sums, norm_coefficient;
  WeightGradient weight_gradient;  // its weight's (define_norm_weight_gradient); undefined otherwise
  // output_quant (q): the whole row's float32 values (d, h, s, b), each
  // group's scale (g, h, s, b) for the codes, and the out_scales output
  // with its own rotation (r, m, h, s, b); undefined otherwise.
  Halide::Func row_values, group_scales, out_scales, scales_rotated;
};

struct RopeAlgorithm {
  RopeAlgorithm();

  Halide::Var d{"d"}, h{"h"}, s{"s"}, b{"b"}, r{"r"}, m{"m"};
  KernelVariant variant;

  // ---- The call arguments it reads (abi/arguments.h) ----
  // ImageParams of the tensor inputs (made by make_input, named by the
  // table), Params of the scalars; arguments() lists the used ones in the
  // table's order.
  abi::ByTensor<Halide::ImageParam> inputs;
  Halide::ImageParam& make_input(Arg a, const Halide::Type& type, int dims, bool single_tensor = false);
  Halide::ImageParam& input(Arg a) { return inputs[a]; }
  const Halide::ImageParam& input(Arg a) const { return inputs[a]; }
  // offset (int64, 0), seq_len (int64, 1), q_scale, k_scale and v_scale (float32, 1),
  // pool_threads (int64, 1: the threads of the Halide pool that runs the
  // kernel, from that runtime, not the call; a CPU schedule sizes its
  // parallel tasks by it, results never depend on it).
  Halide::Param<>& scalar(Arg a) { return scalars[abi::index(a) - abi::kTensorArgCount]; }
  const Halide::Param<>& scalar(Arg a) const { return scalars[abi::index(a) - abi::kTensorArgCount]; }
  void use(Arg a) { used.set(abi::index(a)); }
  bool uses(Arg a) const { return used.test(abi::index(a)); }

  // ---- Positions (positions.h) ----
  Halide::Func position;      // (r, s, b) float64: the position pair r of token (s, b) is rotated by
  Halide::Func position_id;   // (r, s, b) the position as an integer (int32 or int64)
  // Positions, and so cos/sin (xPos scales, sinusoidal PE), are the same for
  // every sequence of the call (implicit positions, unpacked layouts: offset
  // + s; set by define_positions): RoPE's rotations read cos/sin at b = 0,
  // so a schedule's tile of several sequences computes them once for all.
  bool cos_sin_shared_by_batch = false;
  // out_q and out_k are whole rows (d, h, s, b): qk_norm (the dims outside
  // the rotary range normalised) and fp8 outputs (cast); otherwise the
  // rotary view (abi::rotary_view).
  bool whole_rows = false;

  // ---- cos/sin (cos_sin.h) ----
  // Computed frequencies only (undefined with scheme table):
  Halide::Func inv_freq;       // (r) float64, after scaling
  Halide::Func quarter_turns;  // (r): quarter_turns_split(inv_freq)
  // RoPE reduces the angle in 32-bit fixed point (trig.h, reduce_angle_fixed)
  // from position_id and quarter_turns; without them (the other encodings)
  // `reduced` is the float64 reduction of position * inv_freq.
  Halide::Func reduced;       // (r, s, b) -> {angle mod pi/2 (float32), quadrant}
  Halide::Func cos_sin;       // (r, s, b) -> {cos, sin} * attention factor, float32 (scheme table: read from the cache);
                              // sinusoidal: (column, s, b) -> the PE value
  Halide::Func xpos_scale;    // (r, s, b) -> {query scale s_r^p, key scale s_r^-p}; undefined without xPos
  // Sinusoidal with implicit positions (unpacked): (r, block) -> {cos, sin}
  // at the start of the offset's block + block (16 positions each), whose
  // `reduced` is then (r, block); undefined otherwise.
  Halide::Func cos_sin_base;
  // Sinusoidal with implicit positions (unpacked): (column, s) the PE row of
  // position offset + s, read when batch_shares_pe_rows (x has more than
  // one sequence) is true; undefined otherwise.
  Halide::Func pe_rows;
  Halide::Expr batch_shares_pe_rows;

  // ---- Rotation (rotation.h) ----
  // q, k for rope; q alone holds the single tensor of the other encodings
  // (input "x", output "out_x": (d, h, s, b) in the spec's dtype).
  RotatedTensor q, k;         // k.output is undefined unless the variant has k

  // ---- The fused KV-cache append (kv_append.h) and dL/d(inv_freq) (frequency_gradient.h) ----
  KvAppend kv;
  FrequencyGradient gradient;
  // The qk_norm weights' gradients' own cos/sin (and xPos) stages, shared
  // by q's and k's.
  CosSinStages norm_gradient;
  // output_quant: out_scales' own cos/sin stages (it is an output of its
  // own, computing the rotation again); undefined otherwise.
  CosSinStages output_scales;

  std::vector<Halide::Argument> arguments() const;
  std::vector<Halide::Func> outputs() const;

 private:
  std::vector<Halide::Param<>> scalars;
  std::bitset<abi::kArgCount> used;
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

namespace detail {
RopeAlgorithm build_sinusoidal_or_learned(const RopeSpec& spec, const KernelVariant& variant);
RopeAlgorithm build_alibi(const RopeSpec& spec, const KernelVariant& variant);
}  // namespace detail

}  // namespace ropegen::lowering
