// The kernels' views of a checked call, one per given tensor by its shape
// rule (abi/arguments.h), and the checks of their memory: overlaps, spans a
// kernel argument can address, in-place rules.
#include <fmt/format.h>

#include <algorithm>

#include "call/checks.h"
#include "call/memory.h"
#include "call/parts.h"

namespace ropegen::call {
namespace {

// A tensor of the layout as (d, h, s, b): absent dims (one head, one batch)
// have extent 1.
View rows_view(const CheckContext& x, const Tensor& t) {
  View v;
  v.data = t.data, v.type = t.type, v.dims = 4;
  const int at[4] = {x.traits.d, x.traits.h, x.traits.s, x.traits.b};
  for (int i = 0; i < 4; ++i) {
    v.extent[i] = at[i] < 0 ? 1 : t.shape[at[i]];
    v.stride[i] = at[i] < 0 ? 0 : t.strides[at[i]];
  }
  return v;
}

// Ids as (s, b), multi-axis (axis, s, b); [S] shared by the batch has a
// batch stride of 0.
View ids_view(const CheckContext& x, const Tensor& p) {
  View v;
  v.data = p.data, v.type = p.type;
  const int axes = x.c.position_axes;
  const int token_rank = p.rank - (axes > 0 ? 1 : 0);
  FixedVector<std::pair<int64_t, int64_t>, 3> dims;  // (extent, stride)
  if (axes > 0) dims.push_back({axes, p.strides[p.rank - 1]});
  if (token_rank == 1) {
    dims.push_back({p.shape[0], p.strides[0]});
    dims.push_back({x.traits.batch(x.q.shape.data()), 0});
  } else {
    const bool seq_first = x.traits.s < x.traits.b;  // [S, B]
    dims.push_back({p.shape[seq_first ? 0 : 1], p.strides[seq_first ? 0 : 1]});
    dims.push_back({p.shape[seq_first ? 1 : 0], p.strides[seq_first ? 1 : 0]});
  }
  v.dims = static_cast<int>(dims.size());
  for (int i = 0; i < v.dims; ++i) v.extent[i] = dims[i].first, v.stride[i] = dims[i].second;
  return v;
}

View vector_view(const Tensor& t) {
  View v;
  v.data = t.data, v.type = t.type, v.dims = 1;
  v.extent[0] = t.shape[0], v.stride[0] = t.shape[0] > 1 ? t.strides[0] : 1;
  return v;
}

View owned_vector_view(std::vector<int32_t>& values) {
  View v;
  v.data = values.data(), v.type = ElementType::Int32, v.dims = 1;
  v.extent[0] = static_cast<int64_t>(values.size()), v.stride[0] = 1;
  return v;
}

// (column, row): a learned table, a cos/sin cache. Only the rows up to the
// largest position read when that is known (GPU targets stage what the
// kernel is given); the last dim is dense (frequency_checks).
View row_table_view(const CheckContext& x, const Tensor& t) {
  View v;
  v.data = t.data, v.type = t.type, v.dims = 2;
  v.extent = {t.shape[1], x.range_known ? std::min(t.shape[0], x.range.last + 1) : t.shape[0], 0, 0};
  v.stride = {1, t.shape[0] > 1 ? t.strides[0] : t.shape[1], 0, 0};
  return v;
}

// A cache as (d, h, entry, page); a contiguous cache's slots are pages of one entry.
View cache_view(const CheckContext& x, const Tensor& t) {
  View v;
  v.data = t.data, v.type = t.type, v.dims = 4;
  switch (kv_layout(x.c)) {
    case KvLayout::PagedNhd:
      v.extent = {t.shape[3], t.shape[2], t.shape[1], t.shape[0]};
      v.stride = {t.strides[3], t.strides[2], t.strides[1], t.strides[0]};
      break;
    case KvLayout::PagedHnd:
      v.extent = {t.shape[3], t.shape[1], t.shape[2], t.shape[0]};
      v.stride = {t.strides[3], t.strides[1], t.strides[2], t.strides[0]};
      break;
    case KvLayout::Contiguous:
      v.extent = {t.shape[2], t.shape[1], 1, t.shape[0]};
      v.stride = {t.strides[2], t.strides[1], 0, t.strides[0]};
      break;
  }
  return v;
}

// A host call's int64 cache indices as the int32 the kernels read, once
// kv_checks has checked every index a token uses (each fits int32 then);
// negatives stay negative (not appended) and indices no token uses
// (kv_indices past kv_indptr's end) saturate, so nothing wraps onto another
// entry.
void narrow_indices(const CheckContext& x, PreparedCall& p) {
  for (Arg a : abi::kTensorArgs) {
    const Tensor* t = x.tensor(a);
    if (!t || abi::info(a).dtype != abi::DtypeRule::Int32 || t->type != ElementType::Int64 ||
        a == Arg::CachePositions)  // placed by kv_checks already (owned_cache_positions)
      continue;
    std::vector<int32_t>& values = p.owned_indices[a];
    values.resize(static_cast<size_t>(t->shape[0]));
    for (int64_t i = 0; i < t->shape[0]; ++i) {
      const int64_t v = id_at(*t, i);
      values[i] = v < 0 ? -1 : static_cast<int32_t>(std::min<int64_t>(v, INT32_MAX));
    }
    p[a] = owned_vector_view(values);
  }
}

// Halide takes a buffer without data for a bounds query and computes
// nothing, and an empty tensor's data may be null (torch's are): in a call
// with work to do, an empty view gets the address of one that has data. An
// extent is 0, so nothing is read or written there.
void give_empty_views_an_address(PreparedCall& p) {
  void* some = nullptr;
  for (Arg a : abi::kTensorArgs)
    if (p[a].defined() && p[a].data) some = p[a].data;
  for (Arg a : abi::kTensorArgs)
    if (p[a].defined() && !p[a].data && p[a].empty()) p[a].data = some;
}

// Whether an argument's view is a tensor whose rows the kernels read dense
// (and whose single token must fit a kernel argument), not a small buffer.
bool has_rows(Arg a) {
  const abi::ShapeRule s = abi::info(a).shape;
  return s == abi::ShapeRule::Layout || s == abi::ShapeRule::KvCache;
}

}  // namespace

void build_views(CheckContext& x, PreparedCall& p) {
  p.contract = x.c;
  p.device = x.q.device;
  p.stream = x.call.stream;
  p.variant = kernel_variant(x.c, x.call);
  for (Arg a : abi::kTensorArgs) {
    const Tensor* t = x.tensor(a);
    if (!t) continue;
    switch (abi::info(a).shape) {
      case abi::ShapeRule::Layout: p[a] = rows_view(x, *t); break;
      case abi::ShapeRule::TokenIds: p[a] = ids_view(x, *t); break;
      case abi::ShapeRule::Vector: p[a] = vector_view(*t); break;
      case abi::ShapeRule::RowTable: p[a] = row_table_view(x, *t); break;
      case abi::ShapeRule::KvCache: p[a] = cache_view(x, *t); break;
      case abi::ShapeRule::Scalar: break;
    }
  }
  // The kernels read int32 sequence starts: a device call's own (checked
  // int32), else the caller's converted (every start is <= T < 2^31), or
  // one sequence. Paged caches: where each token goes, checked
  // (kv_checks), int32; a device call's own cache_positions or positions.
  p[Arg::CuSeqlens] = View();
  if (x.on_device && kernel_reads_cu_seqlens(x)) {
    p[Arg::CuSeqlens] = vector_view(*x.call.cu_seqlens);
  } else if (x.traits.packed() && !x.on_device) {
    if (x.call.cu_seqlens)
      for (int64_t i = 0; i < x.call.cu_seqlens->shape[0]; ++i)
        p.owned_cu_seqlens.push_back(static_cast<int32_t>(id_at(*x.call.cu_seqlens, i)));
    else
      p.owned_cu_seqlens = {0, static_cast<int32_t>(x.q.shape[x.traits.s])};
    p[Arg::CuSeqlens] = owned_vector_view(p.owned_cu_seqlens);
  }
  p[Arg::CachePositions] = View();
  if (has_kv_cache(x.c) && kv_layout(x.c) != KvLayout::Contiguous) {
    if (x.on_device) {
      p[Arg::CachePositions] = vector_view(x.call.cache_positions ? *x.call.cache_positions : *x.call.positions);
    } else {
      p.owned_cache_positions = std::move(x.placement);
      p[Arg::CachePositions] = owned_vector_view(p.owned_cache_positions);
    }
  }
  if (has_kv_cache(x.c) && !x.on_device) narrow_indices(x, p);
  give_empty_views_an_address(p);
  p.scalars[Arg::Offset].i64 = x.call.offset;
  p.seq_len_known = x.call.seq_len || x.range_known;
  p.scalars[Arg::SeqLen].i64 = x.call.seq_len.value_or(x.range_known ? x.range.last + 1 : 1);
  p.scalars[Arg::QScale].f32 = x.call.q_scale.value_or(1.0f);
  p.scalars[Arg::KScale].f32 = x.call.k_scale.value_or(1.0f);
  p.scalars[Arg::VScale].f32 = x.call.v_scale.value_or(1.0f);
}

void check_memory_of_views(CheckContext& x, const PreparedCall& p) {
  Arguments args;
  for (Arg a : abi::kTensorArgs) {
    const View& v = p[a];
    // Owned int32 copies (host cu_seqlens given as none or int64, cache
    // positions, int64 cache indices) are rope-gen's, not the caller's memory.
    const bool owned = (a == Arg::CuSeqlens && !x.call.cu_seqlens) || (a == Arg::CachePositions && !x.on_device) ||
                       (!p.owned_indices[a].empty() && v.data == p.owned_indices[a].data());
    if (!v.defined() || owned) continue;
    const View* own_input = a == Arg::OutQ ? &p[Arg::Q] : a == Arg::OutK ? &p[Arg::K] : nullptr;
    args.push_back({x.name(a), &v, abi::info(a).direction != abi::Direction::In, has_rows(a), own_input});
  }
  std::vector<Diagnostic> memory = check_memory(args);
  x.errors.insert(x.errors.end(), memory.begin(), memory.end());
  // The append runs as one kernel call (call/parts cuts tensors, not caches).
  if (x.ok() && has_kv_cache(x.c))
    for (const Argument& a : args)
      if (a.tensor && part_span(*a.view, a.view->extent[2], a.view->extent[3]) > kMaxKernelSpan)
        x.fail(a.name, fmt::format("{} spans more than the 2^31-1 elements one kernel call can address; a KV-cache "
                                   "append runs as one call: pass fewer tokens",
                                   a.name));
  // Parts' summed gradients are summed on the host (call/parts.h), which a
  // device call cannot do without reading device memory.
  for (Arg a : abi::kTensorArgs)
    if (x.ok() && x.on_device && abi::is_summed_gradient(a) && p[a].defined() && plan_parts(p).size() > 1)
      x.fail(abi::info(a).name,
             fmt::format("this device call is cut into several kernel calls (a tensor spans more than the 2^31-1 "
                         "elements one kernel argument addresses), whose {} would be summed on the host: pass "
                         "fewer tokens per call",
                         a == Arg::DFreqs ? "dL/d(inv_freq)" : abi::info(a).name));
  // Writing a pair elsewhere than it was read would overwrite other pairs'
  // inputs; the norm weights' gradients read the upstream gradients again,
  // in loops of their own.
  const ropegen_contract kc = kernel_contract(x.c, p.variant);
  const View &q = p[Arg::Q], &k = p[Arg::K];
  const bool in_place =
      !q.empty() && (q.data == p[Arg::OutQ].data || (k.defined() && !k.empty() && k.data == p[Arg::OutK].data));
  if (x.ok() && p.variant.backward && x.c.qk_norm_weight && in_place)
    x.fail("out_q",
           "the backward of a spec with `qk_norm: {weight: per_head}` reads q (and k) again for the weights' "
           "gradients: it cannot run in place; pass out_q (and out_k)");
  if (x.ok() && is_rope(x.c) && kc.output_pairing != kc.pairing && in_place)
    x.fail("out_q",
           "this spec reads pairs with one pairing and writes them with another (output_pairing): it cannot "
           "run in place; pass out_q (and out_k)");
}

}  // namespace ropegen::call
