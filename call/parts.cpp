#include "call/parts.h"

#include <algorithm>
#include <cstring>

#include "abi/kernel_abi.h"
#include "call/contract.h"
#include "call/memory.h"

namespace ropegen::call {
namespace {

halide_dimension_t dim(int64_t min, int64_t extent, int64_t stride) {
  halide_dimension_t d{};
  d.min = static_cast<int32_t>(min), d.extent = static_cast<int32_t>(extent), d.stride = static_cast<int32_t>(stride);
  return d;
}

// The views are written into the part's (undefined) buffers in place: a
// buffer returned and then assigned was two more copies of it per view.
// `device`: the runner's device interface for a device call's views
// (device-only: the address in `device`), null for host views.
void start(RawBuffer& b, void* data, ElementType type, int dims, const halide_device_interface_t* device) {
  if (device) {
    b.buf.device = reinterpret_cast<uintptr_t>(data);
    b.buf.device_interface = device;
  } else {
    b.buf.host = static_cast<uint8_t*>(data);
  }
  b.buf.type = halide_type(type);
  b.buf.dimensions = dims;
}

// Moves a view's first element by `bytes` (host or device address).
void advance(RawBuffer& b, int64_t bytes) {
  if (b.buf.device_interface) b.buf.device += static_cast<uint64_t>(bytes);
  else b.buf.host += bytes;
}

// A whole small buffer (cu_seqlens, table, frequencies, cos/sin cache): extents and
// strides fit 32 bits (prepare_call).
void put_whole(const View& v, RawBuffer& b, const halide_device_interface_t* device) {
  if (!v.defined()) return;
  start(b, v.data, v.type, v.dims, device);
  for (int i = 0; i < v.dims; ++i) b.dim[i] = dim(0, v.extent[i], v.extent[i] > 1 ? v.stride[i] : i == 0 ? 1 : 0);
}

// Tokens and batches of a (d, h, s, b) tensor or (axis, s, b) ids, the
// part's mins kept; the data pointer moves in 64 bits.
void put_part(const View& t, const CallPart& p, RawBuffer& b, const halide_device_interface_t* device) {
  if (!t.defined()) return;
  const int s = t.dims - 2;  // the token dim; batch follows it
  int64_t offset = 0;
  start(b, t.data, t.type, t.dims, device);
  for (int i = 0; i < t.dims; ++i) {
    const int64_t min = i == s ? p.s0 : i == s + 1 ? p.b0 : 0;
    const int64_t extent = i == s ? p.ns : i == s + 1 ? p.nb : t.extent[i];
    offset += min * t.stride[i];
    // A lone element's stride, or an empty tensor's, is never used (the
    // kernels want 1 on the first dim); the others fit (plan_parts).
    b.dim[i] = dim(min, extent, extent > 1 && !t.empty() ? t.stride[i] : i == 0 ? 1 : 0);
  }
  advance(b, offset * element_bytes(t.type));
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

using Tensors = FixedVector<const View*, 6>;

// The rows a call is cut by (kind Rows, but v: an append runs as one part).
Tensors tensors(const PreparedCall& c) {
  Tensors out;
  for (abi::Arg a : abi::kTensorArgs)
    if (abi::info(a).kind == abi::ArgKind::Rows && a != abi::Arg::V && c[a].defined()) out.push_back(&c[a]);
  return out;
}

bool all_empty(const Tensors& all) {
  return std::all_of(all.begin(), all.end(), [](const View* t) { return t->empty(); });
}

// Whether ns tokens of nb batches of every tensor fit a kernel argument.
bool fits(const Tensors& all, int64_t ns, int64_t nb) {
  return std::all_of(all.begin(), all.end(), [&](const View* t) { return part_span(*t, ns, nb) <= kMaxKernelSpan; });
}

// Halide may make an output's argument name unique with a `$n` tail.
std::string_view base_name(std::string_view name) { return name.substr(0, name.find('$')); }

}  // namespace

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

std::optional<CallPart> single_part(const PreparedCall& call) {
  const Tensors all = tensors(call);
  const int64_t S = call[abi::Arg::Q].extent[2], B = call[abi::Arg::Q].extent[3];
  if (all_empty(all) || !fits(all, S, B)) return std::nullopt;
  return CallPart{0, S, 0, B};
}

std::vector<CallPart> plan_parts(const PreparedCall& call) {
  const Tensors all = tensors(call);
  if (all_empty(all)) return {};
  const int64_t S = call[abi::Arg::Q].extent[2], B = call[abi::Arg::Q].extent[3];
  int64_t ns = S, nb = B;
  if (!fits(all, S, B)) {
    if (fits(all, S, 1)) nb = largest(B, [&](int64_t n) { return fits(all, S, n); });
    else nb = 1, ns = largest(S, [&](int64_t n) { return fits(all, n, 1); });
  }
  std::vector<CallPart> parts;
  for (int64_t b0 = 0; b0 < B; b0 += nb)
    for (int64_t s0 = 0; s0 < S; s0 += ns) parts.push_back({s0, std::min(ns, S - s0), b0, std::min(nb, B - b0)});
  return parts;
}

PartViews part_views(const PreparedCall& c, const CallPart& p, const halide_device_interface_t* device) {
  PartViews v;
  for (abi::Arg a : abi::kTensorArgs) {
    const abi::ArgKind kind = abi::info(a).kind;
    if (kind == abi::ArgKind::Rows || kind == abi::ArgKind::Ids)
      put_part(c[a], p, v[a], device);
    else
      put_whole(c[a], v[a], device);
  }
  v.scalars = c.scalars;
  return v;
}

RawBuffer rotary_view(const RawBuffer& t, const ropegen_contract& contract) {
  const int d_stride = t.dim[0].stride;
  const abi::RotaryView r = abi::rotary_view(static_cast<Pairing>(contract.output_pairing), contract.rotary_dim);
  RawBuffer v = t;
  v.buf.dimensions = 5;
  v.dim[0] = dim(0, r.extent0, int64_t{r.stride0} * d_stride);
  v.dim[1] = dim(0, r.extent1, int64_t{r.stride1} * d_stride);
  for (int i = 1; i < 4; ++i) v.dim[i + 1] = t.dim[i];
  advance(v, int64_t{contract.rotary_offset} * d_stride * t.buf.type.bytes());
  return v;
}

RawBuffer dim_range_view(const RawBuffer& t, int first, int count) {
  RawBuffer v = t;
  v.dim[0] = dim(0, count, t.dim[0].stride);
  advance(v, int64_t{first} * t.dim[0].stride * t.buf.type.bytes());
  return v;
}

DimRanges pass_through_ranges(const ropegen_contract& c) {
  DimRanges ranges;
  if (!has_pass_through(c)) return ranges;
  const abi::PassThroughRanges r = abi::pass_through_ranges(c.row_dim, c.rotary_offset, c.rotary_dim);
  for (const abi::DimRange& range : {r.before, r.after})
    if (range.count > 0) ranges.push_back({range.first, range.count});
  return ranges;
}

BoundPart bind_part(const ropegen_contract& kc, const KernelVariant& variant, const PartViews& part) {
  using abi::Arg;
  BoundPart bound{{part}, {}};
  RopeArguments& a = bound.rope;
  // Rope writes the rotary part (pass-through copies do the rest), except
  // with qk_norm; the other encodings write their whole tensor.
  auto output_view = [&](const RawBuffer& t) { return writes_rotary_view(kc) ? rotary_view(t, kc) : t; };
  if (is_rope(kc)) a[Arg::OutQ] = output_view(part[Arg::OutQ]);
  // kv_cache specs read k without out_k (with_k)
  a[Arg::OutK] = variant.with_k ? output_view(part[Arg::OutK]) : RawBuffer();
  auto copies = [&](const RawBuffer& in, const RawBuffer& out) {
    if (in.address() == out.address()) return;  // in place: nothing to copy
    for (auto [first, count] : pass_through_ranges(kc))
      bound.pass_through.push_back({dim_range_view(in, first, count), dim_range_view(out, first, count)});
  };
  copies(part[Arg::Q], part[Arg::OutQ]);
  if (variant.with_k) copies(part[Arg::K], part[Arg::OutK]);
  return bound;
}

// Names as lowering gives the ImageParams, Params and output Funcs: the
// argument table's.
std::optional<ArgumentSource> rope_argument(std::string_view name) {
  const std::optional<abi::Arg> arg = abi::argument_named(base_name(name));
  if (!arg) return std::nullopt;
  ArgumentSource s;
  s.arg = arg;
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

}  // namespace ropegen::call
