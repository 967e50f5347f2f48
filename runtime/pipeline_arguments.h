// A part of a call (call/parts.h) as the Halide::Buffers the JIT pipelines
// realize: the same views, wrapped without copying.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <vector>

#include "abi/arguments.h"
#include "call/parts.h"

namespace ropegen::runtime {

// The rotary pipeline's inputs and outputs (lowering::RopeAlgorithm), by
// argument (abi/arguments.h).
struct PipelineArguments {
  abi::ByTensor<Halide::Buffer<>> buffers;
  abi::Scalars scalars;

  Halide::Buffer<>& operator[](abi::Arg a) { return buffers[a]; }
  const Halide::Buffer<>& operator[](abi::Arg a) const { return buffers[a]; }
  // The defined outputs in the table's order (out_q, out_k, k_cache,
  // v_cache, d_freqs): the pipeline's output order.
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
