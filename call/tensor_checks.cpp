// Checks every tensor argument shares: one device, the dtype its row of
// the argument table asks, data where there are elements; and the shapes of
// q, k and their outputs.
#include <fmt/format.h>

#include "call/checks.h"

namespace ropegen::call {
namespace {

bool is_id_type(ElementType t) { return t == ElementType::Int32 || t == ElementType::Int64; }

// The last dim a tensor of the spec has, and what it is called.
std::pair<int64_t, const char*> row_dim(const ropegen_contract& c) {
  switch (encoding(c)) {
    case Encoding::Rope: return {c.row_dim, "head_dim"};
    case Encoding::Sinusoidal:
    case Encoding::Learned: return {c.row_dim, "dim"};
    case Encoding::Alibi: return {-1, "Sk"};  // any key count
  }
  return {0, ""};
}

void check_tensor(CheckContext& x, const Tensor& t, const char* name) {
  const bool alibi = encoding(x.c) == Encoding::Alibi;
  if (t.rank != x.traits.rank) {
    x.fail(name, fmt::format("{} has shape {} but {} needs {} dims {}", name, shape_str(t),
                             alibi ? "alibi (attention scores)" : fmt::format("layout {}", x.traits.name),
                             x.traits.rank, alibi ? "[B, H, Sq, Sk]" : x.traits.dims));
    return;
  }
  const auto [want_d, d_name] = row_dim(x.c);
  const int64_t d = t.shape[t.rank - 1];
  if (want_d > 0 && d != want_d) {
    std::string hint;
    if (is_rope(x.c) && want_d % 2 == 0 && d == want_d / 2)
      hint = fmt::format("; it looks like cos/sin-sized data (head_dim / 2 = {}): pass the whole head", d);
    else if (is_rope(x.c) && d == x.c.rotary_dim)
      hint = "; it looks like only the rotary part: pass the whole head (rotary_offset/rotary_dim select the part)";
    Shape want = shape_of(t);
    want.back() = want_d;
    x.fail(name, fmt::format("{} has shape {} but the spec's {} is {}: expected {} (last dim = {}){}", name,
                             shape_str(t), d_name, want_d, shape_str(want), d_name, hint));
  }
  if (alibi && t.shape[1] != x.c.num_heads) {
    Shape want = shape_of(t);
    want[1] = x.c.num_heads;
    x.fail(name,
           fmt::format("{} has shape {} but the spec has num_heads {}: expected {} ([B, H, Sq, Sk], H = num_heads)",
                       name, shape_str(t), x.c.num_heads, shape_str(want)));
  }
  for (int i = 0; i < t.rank; ++i)
    if (t.shape[i] < 0 || t.shape[i] > INT32_MAX) {  // 0: an empty tensor, nothing to do
      x.fail(name, fmt::format("{} has shape {}: every dim must be in 0..2^31-1", name, shape_str(t)));
      break;
    }
}

// Outputs have their input's shape.
void check_like(CheckContext& x, const Tensor& out, const char* name, const Tensor& in, const char* in_name) {
  if (shape_of(out) != shape_of(in))
    x.fail(name, fmt::format("{} has shape {} but {} has {}: an output has its input's shape", name, shape_str(out),
                             in_name, shape_str(in)));
}

// k has q's shape but for its heads.
void check_k(CheckContext& x) {
  const int hd = x.traits.h;
  Shape qs = shape_of(x.q), ks = shape_of(*x.k);
  qs[hd] = ks[hd] = 0;
  if (qs == ks) return;
  Shape want = shape_of(x.q);
  want[hd] = x.k->shape[hd];
  x.fail("k", fmt::format("k has shape {} but q has {}: k may differ from q only in its number of heads (expected {})",
                          shape_str(*x.k), shape_str(x.q), shape_str(want)));
}

}  // namespace

// Every tensor of a call is where q is: device kernels take device tensors,
// host kernels host ones; the caller's pointers are never read on the
// wrong side.
void check_devices(CheckContext& x) {
  for (Arg a : abi::kTensorArgs) {
    const Tensor* t = x.tensor(a);
    if (t && t->device != x.q.device)
      x.fail(x.name(a), fmt::format("{} is on {}:{} but {} is on {}:{}: a call's tensors share one device", x.name(a),
                                    to_string(t->device.type), t->device.id, x.name(Arg::Q), to_string(x.q.device.type),
                                    x.q.device.id));
  }
  x.on_device = x.q.device.type != DeviceType::CPU;
}

// The dtype each argument's row asks for. Cache tensors are checked only
// for kv_cache specs (others refuse them by name: kv_checks).
void check_dtypes(CheckContext& x) {
  const ElementType spec_type = element_type(x.c);
  const char* fp8 = kv_fp8_name(x.c);
  for (Arg a : abi::kTensorArgs) {
    const Tensor* t = x.tensor(a);
    if (!t) continue;
    const char* name = x.name(a);
    auto want = [&](ElementType type, const std::string& why) {
      if (t->type != type)
        x.fail(name, fmt::format("{} has dtype {} but {} ({})", name, to_string(t->type), to_string(type), why));
    };
    switch (abi::info(a).dtype) {
      case abi::DtypeRule::Spec: want(spec_type, fmt::format("the spec's dtype is {}", to_string(spec_type))); break;
      case abi::DtypeRule::Output:
        if (has_fp8_output(x.c))
          want(ElementType::UInt8,
               fmt::format("the spec's output_dtype is {}, whose codes are stored as uint8", output_fp8_name(x.c)));
        else want(spec_type, fmt::format("the spec's dtype is {}", to_string(spec_type)));
        break;
      case abi::DtypeRule::SpecOrFloat32:
        if (t->type != spec_type && t->type != ElementType::Float32)
          x.fail(name, fmt::format("{} has dtype {} but the spec's dtype ({}) or float32", name, to_string(t->type),
                                   to_string(spec_type)));
        break;
      case abi::DtypeRule::Float32:
        want(ElementType::Float32, fmt::format("{} is float32 whatever the spec's dtype", name));
        break;
      case abi::DtypeRule::Ids:
        if (!is_id_type(t->type))
          x.fail(name, fmt::format("{} has dtype {}: ids must be int32 or int64", name, to_string(t->type)));
        break;
      case abi::DtypeRule::Int32:
        // A host call's int64 indices are checked as they are, then narrowed
        // (call_views); a device call's are read by the kernels as given.
        if (has_kv_cache(x.c) && !is_id_type(t->type))
          x.fail(name, fmt::format("{} has dtype {}: cache indices are int32 (or int64 on the host)", name,
                                   to_string(t->type)));
        else if (has_kv_cache(x.c) && x.on_device)
          want(ElementType::Int32, "a device call's cache indices are int32: the kernels read them as given");
        break;
      case abi::DtypeRule::KvCache:
        // fp8 codes are uint8 arrays: the message says so.
        if (has_kv_cache(x.c))
          want(kv_element_type(x.c),
               fp8 ? fmt::format("the spec's kv_cache dtype is {}, whose codes are stored as {}", fp8,
                                 to_string(kv_element_type(x.c)))
                   : fmt::format("the spec's kv_cache dtype is {}", to_string(kv_element_type(x.c))));
        break;
      case abi::DtypeRule::Scalar: break;
    }
  }
}

// A tensor with elements has data: a null pointer would crash (or, in
// Halide, be taken for a bounds query, computing nothing). An empty
// tensor's data is never read; its pointer may be null.
void check_data(CheckContext& x) {
  for (Arg a : abi::kTensorArgs) {
    const Tensor* t = x.tensor(a);
    if (t && !t->data && t->elements() > 0)
      x.fail(x.name(a), fmt::format("{} has {} elements but no data (a null pointer)", x.name(a), t->elements()));
  }
}

void check_tensors(CheckContext& x) {
  const char* in = x.name(Arg::Q);
  check_tensor(x, x.q, in);
  check_like(x, x.out_q, x.name(Arg::OutQ), x.q, in);
  if (!x.k) return;
  check_tensor(x, *x.k, "k");
  if (x.ok()) check_k(x);
  if (x.out_k) check_like(x, *x.out_k, "out_k", *x.k, "k");
}

}  // namespace ropegen::call
