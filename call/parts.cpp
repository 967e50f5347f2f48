#include "call/parts.h"

#include <algorithm>
#include <cstring>

#include "call/contract.h"
#include "call/memory.h"

namespace ropegen::call {
namespace {

halide_dimension_t dim(int64_t min, int64_t extent, int64_t stride) {
  halide_dimension_t d{};
  d.min = static_cast<int32_t>(min), d.extent = static_cast<int32_t>(extent), d.stride = static_cast<int32_t>(stride);
  return d;
}

RawBuffer make(void* host, ElementType type, int dims) {
  RawBuffer b;
  b.buf.host = static_cast<uint8_t*>(host);
  b.buf.type = halide_type(type);
  b.buf.dimensions = dims;
  return b;
}

// A whole small buffer (cu_seqlens, table, frequencies, cos/sin cache): extents and
// strides fit 32 bits (prepare_call).
RawBuffer whole(const View& v) {
  if (!v.defined()) return {};
  RawBuffer b = make(v.data, v.type, v.dims);
  for (int i = 0; i < v.dims; ++i) b.dim[i] = dim(0, v.extent[i], v.extent[i] > 1 ? v.stride[i] : i == 0 ? 1 : 0);
  return b;
}

// Tokens and batches of a (d, h, s, b) tensor or (axis, s, b) ids, the
// part's mins kept; the data pointer moves in 64 bits.
RawBuffer part_buffer(const View& t, const CallPart& p) {
  if (!t.defined()) return {};
  const int s = t.dims - 2;  // the token dim; batch follows it
  int64_t offset = 0;
  RawBuffer b = make(t.data, t.type, t.dims);
  for (int i = 0; i < t.dims; ++i) {
    const int64_t min = i == s ? p.s0 : i == s + 1 ? p.b0 : 0;
    const int64_t extent = i == s ? p.ns : i == s + 1 ? p.nb : t.extent[i];
    offset += min * t.stride[i];
    // A lone element's stride, or an empty tensor's, is never used (the
    // kernels want 1 on the first dim); the others fit (plan_parts).
    b.dim[i] = dim(min, extent, extent > 1 && !t.empty() ? t.stride[i] : i == 0 ? 1 : 0);
  }
  b.buf.host += offset * element_bytes(t.type);
  return b;
}

// The largest n in [1, most] with fits(n), given fits(1).
template <typename Fits>
int64_t largest(int64_t most, Fits fits) {
  int64_t lo = 1, hi = most;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

std::vector<const View*> tensors(const PreparedCall& c) {
  std::vector<const View*> out;
  for (const View* t : {&c.q, &c.out_q, &c.k, &c.out_k, &c.saved_q, &c.saved_k})
    if (t->defined()) out.push_back(t);
  return out;
}

// Halide may make an output's argument name unique with a `$n` tail.
std::string_view base_name(std::string_view name) { return name.substr(0, name.find('$')); }

}  // namespace

RawBuffer& RawBuffer::operator=(const RawBuffer& o) {
  buf = o.buf;
  std::memcpy(dim, o.dim, sizeof dim);
  buf.dim = dim;
  return *this;
}

RawBuffer RawBuffer::of(const halide_buffer_t& b) {
  RawBuffer r;
  r.buf.host = b.host;
  r.buf.type = b.type;
  r.buf.dimensions = std::min(b.dimensions, 5);
  for (int i = 0; i < r.buf.dimensions; ++i) r.dim[i] = b.dim[i];
  return r;
}

halide_type_t halide_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return halide_type_t(halide_type_float, 32);
    case ElementType::Float16: return halide_type_t(halide_type_float, 16);
    // The kernels take bfloat16 as its bit patterns (lowering/storage.cpp's storage_type).
    case ElementType::BFloat16: return halide_type_t(halide_type_uint, 16);
    case ElementType::Int32: return halide_type_t(halide_type_int, 32);
    case ElementType::Int64: return halide_type_t(halide_type_int, 64);
    case ElementType::UInt8: return halide_type_t(halide_type_uint, 8);
  }
  return {};
}

std::vector<CallPart> plan_parts(const PreparedCall& call) {
  const std::vector<const View*> all = tensors(call);
  if (std::all_of(all.begin(), all.end(), [](const View* t) { return t->empty(); })) return {};
  auto fits = [&](int64_t ns, int64_t nb) {
    return std::all_of(all.begin(), all.end(), [&](const View* t) { return part_span(*t, ns, nb) <= kMaxKernelSpan; });
  };
  const int64_t S = call.q.extent[2], B = call.q.extent[3];
  int64_t ns = S, nb = B;
  if (!fits(S, B)) {
    if (fits(S, 1)) nb = largest(B, [&](int64_t n) { return fits(S, n); });
    else nb = 1, ns = largest(S, [&](int64_t n) { return fits(n, 1); });
  }
  std::vector<CallPart> parts;
  for (int64_t b0 = 0; b0 < B; b0 += nb)
    for (int64_t s0 = 0; s0 < S; s0 += ns) parts.push_back({s0, std::min(ns, S - s0), b0, std::min(nb, B - b0)});
  return parts;
}

PartViews part_views(const PreparedCall& c, const CallPart& p) {
  PartViews v;
  v.q = part_buffer(c.q, p), v.out_q = part_buffer(c.out_q, p);
  v.k = part_buffer(c.k, p), v.out_k = part_buffer(c.out_k, p);
  v.saved_q = part_buffer(c.saved_q, p), v.saved_k = part_buffer(c.saved_k, p);
  v.positions = part_buffer(c.positions, p);
  v.cu_seqlens = whole(c.cu_seqlens), v.table = whole(c.table), v.freqs = whole(c.freqs), v.d_freqs = whole(c.d_freqs);
  v.cos_sin_cache = whole(c.cos_sin_cache);
  v.v = part_buffer(c.v, p), v.k_cache = whole(c.k_cache), v.v_cache = whole(c.v_cache);
  v.kv_indices = whole(c.kv_indices), v.kv_indptr = whole(c.kv_indptr), v.batch_indices = whole(c.batch_indices);
  v.slot_mapping = whole(c.slot_mapping), v.cache_positions = whole(c.cache_positions);
  v.offset = c.offset, v.seq_len = c.seq_len;
  v.k_scale = c.k_scale, v.v_scale = c.v_scale;
  return v;
}

RawBuffer rotary_view(const RawBuffer& t, const ropegen_contract& contract) {
  const int half = contract.rotary_dim / 2, d_stride = t.dim[0].stride;
  RawBuffer v = t;
  v.buf.dimensions = 5;
  if (contract.output_pairing == static_cast<int32_t>(Pairing::Interleaved))
    v.dim[0] = dim(0, 2, d_stride), v.dim[1] = dim(0, half, 2 * d_stride);
  else
    v.dim[0] = dim(0, half, d_stride), v.dim[1] = dim(0, 2, int64_t{half} * d_stride);
  for (int i = 1; i < 4; ++i) v.dim[i + 1] = t.dim[i];
  v.buf.host += int64_t{contract.rotary_offset} * d_stride * t.buf.type.bytes();
  return v;
}

RawBuffer dim_range_view(const RawBuffer& t, int first, int count) {
  RawBuffer v = t;
  v.dim[0] = dim(0, count, t.dim[0].stride);
  v.buf.host += int64_t{first} * t.dim[0].stride * t.buf.type.bytes();
  return v;
}

std::vector<std::pair<int, int>> pass_through_ranges(const ropegen_contract& c) {
  std::vector<std::pair<int, int>> ranges;
  if (!has_pass_through(c)) return ranges;
  const int after = c.rotary_offset + c.rotary_dim;
  if (c.rotary_offset > 0) ranges.push_back({0, c.rotary_offset});
  if (after < c.row_dim) ranges.push_back({after, c.row_dim - after});
  return ranges;
}

BoundPart bind_part(const ropegen_contract& kc, const KernelVariant& variant, const PartViews& part) {
  BoundPart bound;
  RopeArguments& a = bound.rope;
  // Rope writes the rotary part (pass-through copies do the rest); the
  // other encodings write their whole tensor.
  const bool rope = is_rope(kc);
  a.q = part.q;
  a.out_q = rope ? rotary_view(part.out_q, kc) : part.out_q;
  a.k = part.k;  // kv_cache specs read k without out_k (with_k)
  if (variant.with_k) a.out_k = rotary_view(part.out_k, kc);
  a.positions = part.positions, a.cu_seqlens = part.cu_seqlens, a.table = part.table, a.freqs = part.freqs;
  a.cos_sin_cache = part.cos_sin_cache;
  a.v = part.v, a.k_cache = part.k_cache, a.v_cache = part.v_cache;
  a.kv_indices = part.kv_indices, a.kv_indptr = part.kv_indptr, a.batch_indices = part.batch_indices;
  a.slot_mapping = part.slot_mapping, a.cache_positions = part.cache_positions;
  a.saved_q = part.saved_q, a.saved_k = part.saved_k, a.d_freqs = part.d_freqs;
  a.offset = part.offset, a.seq_len = part.seq_len;
  a.k_scale = part.k_scale, a.v_scale = part.v_scale;
  auto copies = [&](const RawBuffer& in, const RawBuffer& out) {
    if (in.buf.host == out.buf.host) return;  // in place: nothing to copy
    for (auto [first, count] : pass_through_ranges(kc))
      bound.pass_through.push_back({dim_range_view(in, first, count), dim_range_view(out, first, count)});
  };
  copies(part.q, part.out_q);
  if (variant.with_k) copies(part.k, part.out_k);
  return bound;
}

// Names as lowering/rope_algorithm.cpp gives the ImageParams, Params and
// output Funcs.
std::optional<ArgumentSource> rope_argument(std::string_view name) {
  name = base_name(name);
  ArgumentSource s;
  if (name == "q" || name == "x") s.rope_buffer = &RopeArguments::q;
  else if (name == "k") s.rope_buffer = &RopeArguments::k;
  else if (name == "positions") s.rope_buffer = &RopeArguments::positions;
  else if (name == "cu_seqlens") s.rope_buffer = &RopeArguments::cu_seqlens;
  else if (name == "table") s.rope_buffer = &RopeArguments::table;
  else if (name == "freqs") s.rope_buffer = &RopeArguments::freqs;
  else if (name == "cos_sin_cache") s.rope_buffer = &RopeArguments::cos_sin_cache;
  else if (name == "saved_q") s.rope_buffer = &RopeArguments::saved_q;
  else if (name == "saved_k") s.rope_buffer = &RopeArguments::saved_k;
  else if (name == "d_freqs") s.rope_buffer = &RopeArguments::d_freqs;
  else if (name == "out_q" || name == "out_x") s.rope_buffer = &RopeArguments::out_q;
  else if (name == "out_k") s.rope_buffer = &RopeArguments::out_k;
  else if (name == "v") s.rope_buffer = &RopeArguments::v;
  else if (name == "k_cache") s.rope_buffer = &RopeArguments::k_cache;
  else if (name == "v_cache") s.rope_buffer = &RopeArguments::v_cache;
  else if (name == "kv_indices") s.rope_buffer = &RopeArguments::kv_indices;
  else if (name == "kv_indptr") s.rope_buffer = &RopeArguments::kv_indptr;
  else if (name == "batch_indices") s.rope_buffer = &RopeArguments::batch_indices;
  else if (name == "slot_mapping") s.rope_buffer = &RopeArguments::slot_mapping;
  else if (name == "cache_positions") s.rope_buffer = &RopeArguments::cache_positions;
  else if (name == "offset") s.rope_scalar = &RopeArguments::offset;
  else if (name == "seq_len") s.rope_scalar = &RopeArguments::seq_len;
  else if (name == "k_scale") s.rope_float = &RopeArguments::k_scale;
  else if (name == "v_scale") s.rope_float = &RopeArguments::v_scale;
  else return std::nullopt;
  return s;
}

std::optional<ArgumentSource> pass_through_argument(std::string_view name) {
  name = base_name(name);
  ArgumentSource s;
  if (name == "pass_in") s.copy_buffer = &PassThroughArguments::in;
  else if (name == "pass_out") s.copy_buffer = &PassThroughArguments::out;
  else return std::nullopt;
  return s;
}

void run_in_parts(const PreparedCall& call, const std::function<void(const PartViews&)>& run_part) {
  float* d_freqs = static_cast<float*>(call.d_freqs.data);
  const int64_t pairs = call.d_freqs.defined() ? call.d_freqs.extent[0] : 0;
  std::fill(d_freqs, d_freqs + pairs, 0.0f);
  const std::vector<CallPart> parts = plan_parts(call);
  if (parts.size() == 1) return run_part(part_views(call, parts[0]));
  for (const CallPart& p : parts) {
    PartViews part = part_views(call, p);
    std::vector<float> sum(static_cast<size_t>(pairs));
    if (pairs > 0) part.d_freqs.buf.host = reinterpret_cast<uint8_t*>(sum.data());
    run_part(part);
    for (int64_t r = 0; r < pairs; ++r) d_freqs[r] += sum[r];
  }
}

}  // namespace ropegen::call
