#include "runtime/pipeline_arguments.h"

namespace ropegen::runtime {

std::vector<Halide::Buffer<>> PipelineArguments::outputs() const {
  std::vector<Halide::Buffer<>> out;
  for (abi::Arg a : abi::kTensorArgs)
    if (abi::info(a).direction != abi::Direction::In && buffers[a].defined()) out.push_back(buffers[a]);
  return out;
}

Halide::Buffer<> wrap(const call::RawBuffer& b) { return b.defined() ? Halide::Buffer<>(*b.get()) : Halide::Buffer<>(); }

call::RawBuffer unwrap(const Halide::Buffer<>& b) {
  return b.defined() ? call::RawBuffer::of(*b.raw_buffer()) : call::RawBuffer();
}

PipelineArguments wrap(const call::PartViews& a) {
  PipelineArguments p;
  for (abi::Arg arg : abi::kTensorArgs) p[arg] = wrap(a[arg]);
  p.scalars = a.scalars;
  return p;
}

PipelineCopy wrap(const call::PassThroughArguments& c) { return {wrap(c.in), wrap(c.out)}; }

}  // namespace ropegen::runtime
