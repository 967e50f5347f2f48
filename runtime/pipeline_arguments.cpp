#include "runtime/pipeline_arguments.h"

namespace ropegen::runtime {

std::vector<Halide::Buffer<>> PipelineArguments::outputs() const {
  std::vector<Halide::Buffer<>> out = {out_q};
  if (out_k.defined()) out.push_back(out_k);
  if (k_cache.defined()) out.push_back(k_cache);
  if (v_cache.defined()) out.push_back(v_cache);
  if (d_freqs.defined()) out.push_back(d_freqs);
  return out;
}

Halide::Buffer<> wrap(const call::RawBuffer& b) { return b.defined() ? Halide::Buffer<>(*b.get()) : Halide::Buffer<>(); }

call::RawBuffer unwrap(const Halide::Buffer<>& b) {
  return b.defined() ? call::RawBuffer::of(*b.raw_buffer()) : call::RawBuffer();
}

PipelineArguments wrap(const call::PartViews& a) {
  PipelineArguments p;
  p.q = wrap(a.q), p.k = wrap(a.k), p.positions = wrap(a.positions), p.cu_seqlens = wrap(a.cu_seqlens);
  p.table = wrap(a.table), p.freqs = wrap(a.freqs), p.saved_q = wrap(a.saved_q), p.saved_k = wrap(a.saved_k);
  p.cos_sin_cache = wrap(a.cos_sin_cache);
  p.v = wrap(a.v), p.kv_indices = wrap(a.kv_indices), p.kv_indptr = wrap(a.kv_indptr);
  p.batch_indices = wrap(a.batch_indices), p.slot_mapping = wrap(a.slot_mapping);
  p.cache_positions = wrap(a.cache_positions);
  p.k_cache = wrap(a.k_cache), p.v_cache = wrap(a.v_cache);
  p.offset = a.offset, p.seq_len = a.seq_len;
  p.k_scale = a.k_scale, p.v_scale = a.v_scale;
  p.out_q = wrap(a.out_q), p.out_k = wrap(a.out_k), p.d_freqs = wrap(a.d_freqs);
  return p;
}

PipelineCopy wrap(const call::PassThroughArguments& c) { return {wrap(c.in), wrap(c.out)}; }

}  // namespace ropegen::runtime
