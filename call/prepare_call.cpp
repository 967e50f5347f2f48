#include "call/prepare_call.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "call/checks.h"

namespace ropegen::call {
namespace {

// Whether t's elements are one row-major array (size-1 dims' strides aside).
bool row_major(const Tensor& t) {
  int64_t expected = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

Result<PreparedCall> prepare(CheckContext& x) {
  const char* in = input_name(x.c);
  if (!x.call.q) return named_error(in, fmt::format("{} is missing: a call needs the tensor to apply the spec to", in));
  if (x.call.out_k && !x.call.k) return named_error("out_k", "out_k is given without k");
  if (x.call.k && !is_rope(x.c)) return named_error("k", "k is for rope specs; this encoding takes one tensor (x)");
  x.q = *x.call.q;
  x.out_q = x.call.out_q.value_or(x.q);
  // With a KV cache, k is rotated into it; out_k only when asked.
  if (x.call.k) x.k = *x.call.k, x.out_k = has_kv_cache(x.c) ? x.call.out_k : x.call.out_k.value_or(*x.k);
  check_fp8_outputs(x);
  if (!x.ok()) return x.errors;
  check_devices(x);
  check_dtypes(x);
  if (!x.ok()) return x.errors;
  check_tensors(x);
  if (!x.ok()) return x.errors;
  check_data(x);
  if (!x.ok()) return x.errors;  // the checks below read ids and indices
  x.tokens = token_dims(x.traits, x.q.shape.data());
  check_positions(x);
  check_cu_seqlens(x);
  check_seq_len(x);
  if (x.ok()) check_position_range(x);
  if (x.ok()) check_table(x);
  if (x.ok()) check_cos_sin_cache(x);
  if (x.ok()) check_kv_cache(x);
  check_freqs(x);
  check_norm_weights(x);
  check_scales(x);
  check_backward(x);
  if (!x.ok()) return x.errors;
  PreparedCall p;
  build_views(x, p);
  check_memory_of_views(x, p);
  if (!x.ok()) return x.errors;
  return p;
}

}  // namespace

Shape shape_of(const Tensor& t) {
  Shape s;
  for (int i = 0; i < t.rank; ++i) s.push_back(t.shape[i]);
  return s;
}

std::string shape_str(const Shape& s) {
  return s.size() == 1 ? fmt::format("({},)", s[0]) : fmt::format("({})", fmt::join(s, ", "));
}
std::string shape_str(const Tensor& t) { return shape_str(shape_of(t)); }

Shape token_dims(const abi::LayoutTraits& layout, const int64_t* shape) {
  if (layout.b < 0) return {shape[layout.s]};
  return layout.b < layout.s ? Shape{shape[layout.b], shape[layout.s]} : Shape{shape[layout.s], shape[layout.b]};
}

int64_t id_at(const Tensor& t, int64_t i) {
  int64_t offset = 0;
  for (int d = t.rank - 1; d >= 0; --d) offset += (i % t.shape[d]) * t.strides[d], i /= t.shape[d];
  return t.type == ElementType::Int64 ? static_cast<const int64_t*>(t.data)[offset]
                                      : static_cast<const int32_t*>(t.data)[offset];
}

// A row-major tensor is scanned as one array: id_at's divisions per element
// were 5% of a decode call ([64, 1], q 1 + k 1 heads; perf).
PositionRange id_range(const Tensor& t, int64_t n) {
  auto scan = [&](auto id) {
    PositionRange r{id(0), id(0)};
    for (int64_t i = 1; i < n; ++i) r.first = std::min(r.first, id(i)), r.last = std::max(r.last, id(i));
    return r;
  };
  if (!row_major(t)) return scan([&](int64_t i) { return id_at(t, i); });
  if (t.type == ElementType::Int64) return scan([v = static_cast<const int64_t*>(t.data)](int64_t i) { return v[i]; });
  return scan([v = static_cast<const int32_t*>(t.data)](int64_t i) { return int64_t{v[i]}; });
}

CheckContext::CheckContext(const ropegen_contract& contract, const Call& c)
    : c(contract), call(c), traits(abi::layout_traits(tensor_layout(contract))), single_tensor(!is_rope(contract)) {}

const Tensor* CheckContext::tensor(Arg a) const {
  switch (a) {
    case Arg::Q: return &q;
    case Arg::OutQ: return &out_q;
    case Arg::K: return k ? &*k : nullptr;
    case Arg::OutK: return out_k ? &*out_k : nullptr;
    default: return abi::is_tensor(a) && given(a) ? &*given(a) : nullptr;
  }
}

bool View::empty() const {
  for (int i = 0; i < dims; ++i)
    if (extent[i] == 0) return true;
  return false;
}

const char* input_name(const ropegen_contract& c) { return abi::user_name(Arg::Q, !is_rope(c)); }
const char* output_name(const ropegen_contract& c) { return abi::user_name(Arg::OutQ, !is_rope(c)); }

Result<PreparedCall> prepare_call(const ropegen_contract& contract, const Call& call) {
  CheckContext context(contract, call);
  return prepare(context);
}

Result<PreparedCall> prepare_call(const RopeSpec& spec, const Call& call) {
  return prepare_call(call_contract(spec), call);
}

}  // namespace ropegen::call
