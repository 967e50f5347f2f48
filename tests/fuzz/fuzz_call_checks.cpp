// libFuzzer target: a call's checks (call/prepare_call, which every front
// door goes through: C++, the C API, AOT libraries, Python, the CLI) on
// arbitrary tensors for a handful of specs that reach every check: shapes,
// strides (negative, huge, zero), dtypes, devices, null data, id and index
// values (negative, past int32, past 2^32), non-finite frequencies. The
// checks must answer with diagnostics, never crash, read outside a tensor,
// overflow or hang. Tensors whose values the checks read on the host get a
// buffer of exactly their span (ASan sees any read outside it); the row
// tensors, which the checks never read, point into a few bytes. A call that
// passes must give every view with work data (no null buffer reaches a
// kernel: Halide would take it for a bounds query and compute nothing).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "abi/arguments.h"
#include "call/prepare_call.h"
#include "ropegen/spec_io.h"

namespace {

using ropegen::ElementType;
using ropegen::Tensor;

const std::vector<ropegen::RopeSpec>& specs() {
  static const std::vector<ropegen::RopeSpec> all = [] {
    const char* texts[] = {
        "name: a\nhead_dim: 8\nrotary_dim: 6\nrotary_offset: 2\nlayout: bshd\n",
        "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\npairing: interleaved\n",
        "name: a\nhead_dim: 8\nlayout: thd\n",
        "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: paged_nhd, page_size: 4}\n",
        "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: contiguous, dtype: fp8_e4m3}\n",
        "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: paged_hnd, page_size: 2}\n",
        "name: a\nhead_dim: 8\nlayout: bhsd\npositions: explicit\nfrequency: {scheme: table}\n",
        "name: a\nhead_dim: 8\nlayout: sbhd\nfrequency: {scheme: runtime}\n",
        "name: a\nhead_dim: 16\nlayout: bshd\npositions: explicit\naxes: {sections: [2, 3, 3]}\n",
        "name: a\nhead_dim: 8\nrotary_dim: 4\nlayout: thd\nqk_norm: {eps: 1.0e-6}\n",
        "name: a\nhead_dim: 8\nrotary_dim: 4\nlayout: bshd\noutput_dtype: fp8_e4m3\n",
        "name: s\nencoding: sinusoidal\ndim: 8\n",
        "name: l\nencoding: learned\ndim: 8\n",
        "name: b\nencoding: alibi\nnum_heads: 4\n",
        "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: paged_nhd, page_size: 4, dtype: "
        "fp8_e5m2}\noutput_dtype: fp8_e5m2\nfp8_scale: multiply\n",
        "name: a\nhead_dim: 8\nrotary_dim: 4\nlayout: bshd\noutput_dtype: fp8_e4m3\noutput_quant: {group: 4}\n",
    };
    std::vector<ropegen::RopeSpec> out;
    for (const char* t : texts) out.push_back(ropegen::parse_spec(t, "fuzz.yaml").value());
    return out;
  }();
  return all;
}

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return at_ < size_ ? data_[at_++] : 0; }
  bool done() const { return at_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
};

int64_t dim_of(uint8_t b) {
  static const int64_t kDims[] = {0, 1, 2, 3, 4, 5, 6, 8, 16, 3, 2, 1, -1, int64_t{1} << 31, INT64_MAX, int64_t{1} << 40};
  return kDims[b % 16];
}

int64_t id_of(uint8_t b) {
  if (b < 224) return static_cast<int64_t>(b % 24) - 2;
  static const int64_t kIds[] = {INT32_MAX, INT32_MIN, (int64_t{1} << 32) + 7, -(int64_t{1} << 32) + 5, INT64_MAX,
                                 INT64_MIN, (int64_t{1} << 32), (int64_t{1} << 32) + 1, int64_t{1} << 53, 4096,
                                 INT32_MAX - 1, 63, 64, 65, 127, 128, 1000, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                 17, 18, 19, 20, 21};
  return kIds[b - 224];
}

float float_of(uint8_t b) {
  if (b < 240) return static_cast<float>(b) / 64.0f;
  static const float kFloats[] = {0.0f, -1.0f, __builtin_nanf(""), __builtin_inff(), -__builtin_inff(), 1e30f, 2048.0f,
                                  1024.0f, 1e-40f, -0.0f, 3.0f, 0.5f, 1.5f, 2.0f, 4.0f, 8.0f};
  return kFloats[b - 240];
}

// Storage of a tensor whose values the checks may read.
struct Buffer {
  std::vector<int64_t> words;  // 8-byte aligned
};

// Element offsets [low, high] a tensor reaches, or false when they overflow.
bool span_of(const Tensor& t, int64_t& low, int64_t& high) {
  low = high = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] == 0) return low = 0, high = -1, true;
    int64_t far = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &far)) return false;
    if (far < 0 ? __builtin_add_overflow(low, far, &low) : __builtin_add_overflow(high, far, &high)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ropegen::abi::Arg;
  Bytes in(data, size);
  const ropegen::RopeSpec& spec = specs()[in.next() % specs().size()];
  ropegen::Call call;
  std::vector<Buffer> buffers;
  buffers.reserve(ropegen::abi::kTensorArgCount);
  static char rows_memory[64];  // the checks never read a row tensor's values
  for (Arg a : ropegen::abi::kTensorArgs) {
    const ropegen::abi::ArgumentInfo& info = ropegen::abi::info(a);
    if (!info.call_tensor) continue;
    const uint8_t how = in.next();
    if (how % 4 == 0 && a != Arg::Q) continue;  // absent (q: almost always given)
    Tensor t;
    static const ElementType kTypes[] = {ElementType::Float32, ElementType::Float16, ElementType::BFloat16,
                                         ElementType::Int32,   ElementType::Int64,   ElementType::UInt8};
    // Mostly the type the argument's row asks; sometimes any.
    const bool ids = info.dtype == ropegen::abi::DtypeRule::Ids || info.dtype == ropegen::abi::DtypeRule::Int32;
    t.type = how & 0x80 ? kTypes[(how >> 2) % 6]
             : ids      ? (how & 0x10 ? ElementType::Int64 : ElementType::Int32)
             : info.dtype == ropegen::abi::DtypeRule::Float32 ? ElementType::Float32
                                                               : (how & 0x10 ? ElementType::UInt8 : ElementType::Float32);
    if (how & 0x40) t.device = {ropegen::DeviceType::CUDA, 0};
    t.rank = 1 + in.next() % ropegen::kMaxRank;
    for (int i = 0; i < t.rank; ++i) t.shape[i] = dim_of(in.next());
    // Dense row-major, or each stride from the input (0, negative, huge).
    const uint8_t layout = in.next();
    int64_t stride = 1;
    for (int i = t.rank - 1; i >= 0; --i) {
      t.strides[i] = layout & 1 ? stride : dim_of(in.next()) * (layout & 2 ? -1 : 1);
      if (__builtin_mul_overflow(stride, t.shape[i] < 1 ? 1 : t.shape[i], &stride)) stride = 1;
    }
    int64_t low = 0, high = 0;
    bool negative = false;
    for (int i = 0; i < t.rank; ++i) negative = negative || t.shape[i] < 0;
    if (how & 0x20) {
      t.data = nullptr;
    } else if (info.kind == ropegen::abi::ArgKind::Rows || negative) {
      t.data = rows_memory;  // never read (negative dims: refused before any value is)
    } else {
      // A huge tensor the checks may scan cannot be backed by memory here.
      int64_t n = 0;
      if (!span_of(t, low, high) || __builtin_sub_overflow(high, low, &n) || n >= 4096) return 0;
      n += 1;
      Buffer& b = buffers.emplace_back();
      const int64_t bytes = ropegen::element_bytes(t.type);
      b.words.resize(static_cast<size_t>((n * bytes + 7) / 8) + 1);
      auto* base = reinterpret_cast<uint8_t*>(b.words.data());
      for (int64_t i = 0; i < n; ++i) {
        uint8_t* e = base + i * bytes;
        const uint8_t v = in.next();
        if (t.type == ElementType::Int64) *reinterpret_cast<int64_t*>(e) = id_of(v);
        else if (t.type == ElementType::Int32) *reinterpret_cast<int32_t*>(e) = static_cast<int32_t>(id_of(v));
        else if (t.type == ElementType::Float32) *reinterpret_cast<float*>(e) = float_of(v);
        else for (int j = 0; j < bytes; ++j) e[j] = v;
      }
      t.data = base - low * bytes;
    }
    call.*info.call_tensor = t;
  }
  const uint8_t scalars = in.next();
  call.offset = scalars & 1 ? id_of(in.next()) : 0;
  if (scalars & 2) call.seq_len = id_of(in.next());
  if (scalars & 4) call.k_scale = float_of(in.next());
  if (scalars & 8) call.v_scale = float_of(in.next());
  call.backward = scalars & 16;
  if (scalars & 32) call.q_scale = float_of(in.next());

  const ropegen::Result<ropegen::call::PreparedCall> prepared = ropegen::call::prepare_call(spec, call);
  if (!prepared) {
    for (const ropegen::Diagnostic& d : prepared.errors())
      if (d.message.empty()) std::abort();  // every refusal says why
    return 0;
  }
  const ropegen::call::PreparedCall& p = *prepared;
  bool work = false;
  for (Arg a : ropegen::abi::kTensorArgs)
    work = work || (ropegen::abi::info(a).kind == ropegen::abi::ArgKind::Rows && p[a].defined() && !p[a].empty());
  for (Arg a : ropegen::abi::kTensorArgs)
    if (work && p[a].defined() && !p[a].data) std::abort();  // a bounds query, not a call
  return 0;
}
