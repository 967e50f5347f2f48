// A part of a call (call/parts.h) as the Halide::Buffers the JIT pipelines
// realize: the same views, wrapped without copying.
#pragma once

#include <cstdint>
#include <vector>

#include <Halide.h>

#include "call/parts.h"

namespace ropegen::runtime {

// The rotary pipeline's inputs and outputs (lowering::RopeAlgorithm).
struct PipelineArguments {
  Halide::Buffer<> q, k, positions, cu_seqlens, table, freqs, cos_sin_cache, saved_q, saved_k;
  Halide::Buffer<> v, kv_indices, kv_indptr, batch_indices, slot_mapping, cache_positions;
  int64_t offset = 0, seq_len = 1;
  float k_scale = 1.0f, v_scale = 1.0f;  // fp8 caches
  Halide::Buffer<> out_q, out_k, k_cache, v_cache, d_freqs;

  // out_q (, out_k) (, k_cache (, v_cache)) (, d_freqs): the pipeline's output order
  std::vector<Halide::Buffer<>> outputs() const;
};

// lowering::PassThroughCopy's pass_in -> pass_out.
struct PipelineCopy {
  Halide::Buffer<> in, out;
};

// A raw view as a Halide::Buffer (not owning its data); undefined stays undefined.
Halide::Buffer<> wrap(const call::RawBuffer& b);
// The host side of a Halide::Buffer as a raw view.
call::RawBuffer unwrap(const Halide::Buffer<>& b);

// A part's views or a pipeline's arguments (call::RopeArguments is PartViews).
PipelineArguments wrap(const call::PartViews& a);
PipelineCopy wrap(const call::PassThroughArguments& c);

}  // namespace ropegen::runtime
