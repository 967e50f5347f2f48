#include "host_apply.h"

#include <tuple>

#include <fmt/format.h>

#include "ropegen/runtime.h"
#include "runtime/host_tensor.h"

namespace ropegen::runtime {
namespace {

Tensor dense(void* data, ElementType type, const std::vector<int64_t>& shape) {
  return Tensor::dense(data, type, shape.data(), static_cast<int>(shape.size()));
}

// A float32 host tensor in the spec's storage type, and where its result goes.
struct Staged {
  HostStorage in, out;
  Staged(const HostTensor& t, DType dtype) : in(to_storage(t.data, dtype)), out(in.empty_like()) {}
};

}  // namespace

Result<ApplyResult> apply_on_host(const RopeSpec& spec, const ApplyRequest& r) {
  Call call;
  Staged q(r.q, spec.dtype);
  call.q = dense(q.in.data(), q.in.element_type(), r.q.shape);
  call.out_q = dense(q.out.data(), q.out.element_type(), r.q.shape);
  std::optional<Staged> k;
  if (r.k) {
    k.emplace(*r.k, spec.dtype);
    call.k = dense(k->in.data(), k->in.element_type(), r.k->shape);
    if (r.out_k) call.out_k = dense(k->out.data(), k->out.element_type(), r.k->shape);
  }
  // KV-cache append: caches in the cache dtype, indices as int32 (an id
  // outside int32 is refused here, naming its tensor).
  const DType cache_dtype = spec.kv_cache.float_dtype();
  std::optional<std::vector<uint8_t>> k_codes, v_codes;  // fp8 caches, as they came
  if (r.k_cache_codes)
    k_codes = r.k_cache_codes->codes, call.k_cache = dense(k_codes->data(), ElementType::UInt8, r.k_cache_codes->shape);
  if (r.v_cache_codes)
    v_codes = r.v_cache_codes->codes, call.v_cache = dense(v_codes->data(), ElementType::UInt8, r.v_cache_codes->shape);
  call.k_scale = r.k_scale, call.v_scale = r.v_scale;
  std::optional<HostStorage> v, k_cache, v_cache;
  if (r.v) v = to_storage(r.v->data, spec.dtype), call.v = dense(v->data(), v->element_type(), r.v->shape);
  if (r.k_cache)
    k_cache = to_storage(r.k_cache->data, cache_dtype),
    call.k_cache = dense(k_cache->data(), k_cache->element_type(), r.k_cache->shape);
  if (r.v_cache)
    v_cache = to_storage(r.v_cache->data, cache_dtype),
    call.v_cache = dense(v_cache->data(), v_cache->element_type(), r.v_cache->shape);
  std::vector<int32_t> index_storage[5];
  const std::tuple<const std::optional<std::vector<int64_t>>*, const char*, std::optional<Tensor>*> indices[] = {
      {&r.kv_indices, "kv_indices", &call.kv_indices},
      {&r.kv_indptr, "kv_indptr", &call.kv_indptr},
      {&r.batch_indices, "batch_indices", &call.batch_indices},
      {&r.slot_mapping, "slot_mapping", &call.slot_mapping},
      {&r.cache_positions, "cache_positions", &call.cache_positions}};
  for (int i = 0; i < 5; ++i) {
    const auto [values, name, into] = indices[i];
    if (!*values) continue;
    for (int64_t x : **values) {
      if (x < INT32_MIN || x > INT32_MAX)
        return Diagnostic{{name, -1, -1}, fmt::format("{} holds {}, which does not fit int32 (cache indices are int32)", name, x), {}};
      index_storage[i].push_back(static_cast<int32_t>(x));
    }
    *into = dense(index_storage[i].data(), ElementType::Int32, {static_cast<int64_t>(index_storage[i].size())});
  }
  std::optional<HostStorage> saved_q, saved_k, table;
  if (r.saved_q) saved_q = to_storage(r.saved_q->data, spec.dtype), call.saved_q = dense(saved_q->data(), saved_q->element_type(), r.saved_q->shape);
  if (r.saved_k) saved_k = to_storage(r.saved_k->data, spec.dtype), call.saved_k = dense(saved_k->data(), saved_k->element_type(), r.saved_k->shape);
  if (r.table) table = to_storage(r.table->data, spec.dtype), call.table = dense(table->data(), table->element_type(), r.table->shape);
  // Ids are read in the width they came in (the kernel variant follows it).
  std::vector<int32_t> ids32;
  std::vector<int64_t> ids64;
  if (r.positions) {
    if (r.positions->is_int64) {
      ids64 = r.positions->values;
      call.positions = dense(ids64.data(), ElementType::Int64, r.positions->shape);
    } else {
      ids32.reserve(r.positions->values.size());
      for (int64_t v : r.positions->values) {
        if (v < INT32_MIN || v > INT32_MAX)
          return Diagnostic{{"positions", -1, -1}, "position id " + std::to_string(v) + " does not fit int32 ids; pass them as int64", {}};
        ids32.push_back(static_cast<int32_t>(v));
      }
      call.positions = dense(ids32.data(), ElementType::Int32, r.positions->shape);
    }
  }
  std::vector<int64_t> cu = r.cu_seqlens.value_or(std::vector<int64_t>{});
  if (r.cu_seqlens) call.cu_seqlens = dense(cu.data(), ElementType::Int64, {static_cast<int64_t>(cu.size())});
  std::vector<float> freqs, d_freqs;
  if (r.freqs) {
    freqs = r.freqs->data;
    call.freqs = dense(freqs.data(), ElementType::Float32, r.freqs->shape);
    if (r.backward) {
      d_freqs.assign(freqs.size(), 0.0f);
      call.d_freqs = dense(d_freqs.data(), ElementType::Float32, r.freqs->shape);
    }
  }
  // The cache is float32 whatever the spec's dtype: passed as it is.
  std::vector<float> cos_sin_cache;
  if (r.cos_sin_cache) {
    cos_sin_cache = r.cos_sin_cache->data;
    call.cos_sin_cache = dense(cos_sin_cache.data(), ElementType::Float32, r.cos_sin_cache->shape);
  }
  call.offset = r.offset;
  call.seq_len = r.seq_len;
  call.backward = r.backward;
  if (Status s = Runtime::process().run(spec, call, r.target); !s) return s.errors();

  ApplyResult result;
  result.out_q = q.out.to_float();
  if (k && r.out_k) result.out_k = k->out.to_float();
  if (k_cache) result.k_cache = k_cache->to_float();
  if (v_cache) result.v_cache = v_cache->to_float();
  result.k_cache_codes = std::move(k_codes), result.v_cache_codes = std::move(v_codes);
  if (call.d_freqs) result.d_freqs = d_freqs;
  return result;
}

}  // namespace ropegen::runtime
