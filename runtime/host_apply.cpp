#include "host_apply.h"

#include <optional>
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

// Everything the call points into; allocated once, never moved.
struct HostCall::Storage {
  std::optional<Staged> q, k;
  bool out_k = false;
  std::optional<std::vector<uint8_t>> k_codes, v_codes;  // fp8 caches, as they came
  std::optional<HostStorage> v, k_cache, v_cache, saved_q, saved_k, table;
  std::vector<int32_t> index_storage[5];
  std::vector<int32_t> ids32;
  std::vector<int64_t> ids64, cu;
  std::vector<float> freqs, d_freqs, cos_sin_cache;
};

HostCall::HostCall() : storage_(std::make_unique<Storage>()) {}
HostCall::~HostCall() = default;

Result<std::unique_ptr<HostCall>> HostCall::make(const RopeSpec& spec, const ApplyRequest& r) {
  std::unique_ptr<HostCall> made(new HostCall());
  Call& call = made->call_;
  Storage& s = *made->storage_;
  Staged& q = s.q.emplace(r.q, spec.dtype);
  call.q = dense(q.in.data(), q.in.element_type(), r.q.shape);
  call.out_q = dense(q.out.data(), q.out.element_type(), r.q.shape);
  if (r.k) {
    Staged& k = s.k.emplace(*r.k, spec.dtype);
    call.k = dense(k.in.data(), k.in.element_type(), r.k->shape);
    s.out_k = r.out_k;
    if (r.out_k) call.out_k = dense(k.out.data(), k.out.element_type(), r.k->shape);
  }
  // KV-cache append: caches in the cache dtype, indices as int32 (an id
  // outside int32 is refused here, naming its tensor).
  const DType cache_dtype = spec.kv_cache.float_dtype();
  if (r.k_cache_codes)
    s.k_codes = r.k_cache_codes->codes, call.k_cache = dense(s.k_codes->data(), ElementType::UInt8, r.k_cache_codes->shape);
  if (r.v_cache_codes)
    s.v_codes = r.v_cache_codes->codes, call.v_cache = dense(s.v_codes->data(), ElementType::UInt8, r.v_cache_codes->shape);
  call.k_scale = r.k_scale, call.v_scale = r.v_scale;
  if (r.v) s.v = to_storage(r.v->data, spec.dtype), call.v = dense(s.v->data(), s.v->element_type(), r.v->shape);
  if (r.k_cache)
    s.k_cache = to_storage(r.k_cache->data, cache_dtype),
    call.k_cache = dense(s.k_cache->data(), s.k_cache->element_type(), r.k_cache->shape);
  if (r.v_cache)
    s.v_cache = to_storage(r.v_cache->data, cache_dtype),
    call.v_cache = dense(s.v_cache->data(), s.v_cache->element_type(), r.v_cache->shape);
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
        return named_error(name,
                           fmt::format("{} holds {}, which does not fit int32 (cache indices are int32)", name, x));
      s.index_storage[i].push_back(static_cast<int32_t>(x));
    }
    *into = dense(s.index_storage[i].data(), ElementType::Int32, {static_cast<int64_t>(s.index_storage[i].size())});
  }
  if (r.saved_q) s.saved_q = to_storage(r.saved_q->data, spec.dtype), call.saved_q = dense(s.saved_q->data(), s.saved_q->element_type(), r.saved_q->shape);
  if (r.saved_k) s.saved_k = to_storage(r.saved_k->data, spec.dtype), call.saved_k = dense(s.saved_k->data(), s.saved_k->element_type(), r.saved_k->shape);
  if (r.table) s.table = to_storage(r.table->data, spec.dtype), call.table = dense(s.table->data(), s.table->element_type(), r.table->shape);
  // Ids are read in the width they came in (the kernel variant follows it).
  if (r.positions) {
    if (r.positions->is_int64) {
      s.ids64 = r.positions->values;
      call.positions = dense(s.ids64.data(), ElementType::Int64, r.positions->shape);
    } else {
      s.ids32.reserve(r.positions->values.size());
      for (int64_t v : r.positions->values) {
        if (v < INT32_MIN || v > INT32_MAX)
          return named_error("positions",
                             "position id " + std::to_string(v) + " does not fit int32 ids; pass them as int64");
        s.ids32.push_back(static_cast<int32_t>(v));
      }
      call.positions = dense(s.ids32.data(), ElementType::Int32, r.positions->shape);
    }
  }
  if (r.cu_seqlens) {
    s.cu = *r.cu_seqlens;
    call.cu_seqlens = dense(s.cu.data(), ElementType::Int64, {static_cast<int64_t>(s.cu.size())});
  }
  if (r.freqs) {
    s.freqs = r.freqs->data;
    call.freqs = dense(s.freqs.data(), ElementType::Float32, r.freqs->shape);
    if (r.backward) {
      s.d_freqs.assign(s.freqs.size(), 0.0f);
      call.d_freqs = dense(s.d_freqs.data(), ElementType::Float32, r.freqs->shape);
    }
  }
  // The cache is float32 whatever the spec's dtype: passed as it is.
  if (r.cos_sin_cache) {
    s.cos_sin_cache = r.cos_sin_cache->data;
    call.cos_sin_cache = dense(s.cos_sin_cache.data(), ElementType::Float32, r.cos_sin_cache->shape);
  }
  call.offset = r.offset;
  call.seq_len = r.seq_len;
  call.backward = r.backward;
  return made;
}

ApplyResult HostCall::results() const {
  const Storage& s = *storage_;
  ApplyResult result;
  result.out_q = s.q->out.to_float();
  if (s.k && s.out_k) result.out_k = s.k->out.to_float();
  if (s.k_cache) result.k_cache = s.k_cache->to_float();
  if (s.v_cache) result.v_cache = s.v_cache->to_float();
  result.k_cache_codes = s.k_codes, result.v_cache_codes = s.v_codes;
  if (call_.d_freqs) result.d_freqs = s.d_freqs;
  return result;
}

Result<ApplyResult> apply_on_host(const RopeSpec& spec, const ApplyRequest& r) {
  Result<std::unique_ptr<HostCall>> host = HostCall::make(spec, r);
  if (!host) return host.errors();
  if (Status s = Runtime::process().run(spec, (*host)->call(), r.target); !s) return s.errors();
  return (*host)->results();
}

}  // namespace ropegen::runtime
