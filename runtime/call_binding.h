// One RopeCall as the arguments of a spec's compiled pipelines: the rotary
// pipeline's inputs and output views (tensor_view's rotary_view), and the
// pass-through copies a partial-rotary spec needs out of place
// (dim_range_view). The JIT kernel sets these on its ImageParams; a loaded
// kernel passes them by argument name. Deciding which views a call means is
// done here once, so the two kinds of kernel cannot disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"
#include "runtime/kernel.h"

namespace ropegen::runtime {

// One part of a RopeCall (call_parts.h) as Halide buffers whose 32-bit
// extents and strides hold it; the tensors' mins are the part's first token
// and batch, so positions, offsets and cu_seqlens mean what they meant.
struct BufferCall {
  Halide::Buffer<> q, out_q, k, out_k, saved_q, saved_k;  // logical (d, h, s, b)
  Halide::Buffer<> positions;
  Halide::Buffer<int32_t> cu_seqlens;
  Halide::Buffer<> table, freqs, d_freqs;
  int64_t offset = 0, seq_len = 1;
};

// The rotary pipeline's arguments (lowering::RopeAlgorithm::arguments(),
// then its outputs). Only those the variant and spec use are set.
struct RopeArguments {
  Halide::Buffer<> q, k, positions, cu_seqlens, table, freqs, saved_q, saved_k;
  int64_t offset = 0, seq_len = 1;
  Halide::Buffer<> out_q, out_k;  // rotary views of the caller's outputs (rope), or the output itself
  Halide::Buffer<> d_freqs;

  std::vector<Halide::Buffer<>> outputs() const;  // out_q (, out_k) (, d_freqs): the pipeline's output order
};

// One range of dims outside the rotary part: lowering::PassThroughCopy's
// pass_in -> pass_out.
struct PassThroughArguments {
  Halide::Buffer<> in, out;
};

struct BoundCall {
  RopeArguments rope;
  std::vector<PassThroughArguments> pass_through;  // empty in place or with full rotary
};

// Where an argument of a compiled pipeline comes from, found by the name
// lowering gave it (as in manifest.json; Halide may add a `$n` tail to an
// output's name). Loaded kernels resolve their metadata once, at load.
struct ArgumentSource {
  Halide::Buffer<> RopeArguments::*rope_buffer = nullptr;
  int64_t RopeArguments::*rope_scalar = nullptr;
  Halide::Buffer<> PassThroughArguments::*copy_buffer = nullptr;
};
std::optional<ArgumentSource> rope_argument(std::string_view name);
std::optional<ArgumentSource> pass_through_argument(std::string_view name);

// Throws std::invalid_argument for a call no kernel of the spec can run
// (writing pairs elsewhere than they were read, in place). `spec` is the
// kernel's (lowering::kernel_spec).
BoundCall bind_call(const RopeSpec& spec, const lowering::KernelVariant& variant, const BufferCall& call);

}  // namespace ropegen::runtime
