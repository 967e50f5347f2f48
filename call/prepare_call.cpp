#include "call/prepare_call.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "call/contract.h"
#include "call/layout_traits.h"
#include "call/memory.h"
#include "call/parts.h"
#include "ropegen/position_limits.h"

namespace ropegen::call {
namespace {

Shape shape_of(const Tensor& t) {
  Shape s;
  for (int i = 0; i < t.rank; ++i) s.push_back(t.shape[i]);
  return s;
}

std::string shape_str(const Shape& s) {
  return s.size() == 1 ? fmt::format("({},)", s[0]) : fmt::format("({})", fmt::join(s, ", "));
}
std::string shape_str(const Tensor& t) { return shape_str(shape_of(t)); }

bool is_id_type(ElementType t) { return t == ElementType::Int32 || t == ElementType::Int64; }

// Reads element i (row-major over the shape) of an id tensor on the host.
int64_t id_at(const Tensor& t, int64_t i) {
  int64_t offset = 0;
  for (int d = t.rank - 1; d >= 0; --d) offset += (i % t.shape[d]) * t.strides[d], i /= t.shape[d];
  return t.type == ElementType::Int64 ? static_cast<const int64_t*>(t.data)[offset]
                                      : static_cast<const int32_t*>(t.data)[offset];
}

struct PositionRange {
  int64_t first = 0, last = 0;  // the smallest and largest position read
};

// Whether t's elements are one row-major array (size-1 dims' strides aside).
bool row_major(const Tensor& t) {
  int64_t expected = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

// The smallest and largest of n > 0 ids. A row-major tensor is scanned as
// one array: id_at's divisions per element were 5% of a decode call
// ([64, 1], q 1 + k 1 heads; perf).
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

class Preparer {
 public:
  Preparer(const ropegen_contract& c, const Call& call) : c_(c), call_(call), traits_(layout_traits(tensor_layout(c))) {}

  Result<PreparedCall> run() {
    const char* in = input_name(c_);
    if (!call_.q)
      return named_error(in, fmt::format("{} is missing: a call needs the tensor to apply the spec to", in));
    q_ = *call_.q;
    out_q_ = call_.out_q.value_or(q_);
    if (call_.out_k && !call_.k) return named_error("out_k", "out_k is given without k");
    if (call_.k) {
      if (!is_rope(c_)) return named_error("k", "k is for rope specs; this encoding takes one tensor (x)");
      k_ = *call_.k;
      // With a KV cache, k is rotated into it; out_k only when asked.
      out_k_ = has_kv_cache(c_) ? call_.out_k : call_.out_k.value_or(*k_);
    }
    check_devices();
    check_types();
    if (!errors_.empty()) return errors_;
    check_tensor(q_, in);
    check_like(out_q_, output_name(c_), q_, in);
    if (k_) {
      check_tensor(*k_, "k");
      if (errors_.empty()) check_k();
      if (out_k_) check_like(*out_k_, "out_k", *k_, "k");
    }
    if (!errors_.empty()) return errors_;
    tokens_ = traits_.token_dims(q_.shape.data());
    check_positions();
    check_cu_seqlens();
    if (call_.seq_len && *call_.seq_len < 1)
      errors_.push_back(named_error("seq_len", fmt::format("seq_len ({}) must be >= 1", *call_.seq_len)));
    if (errors_.empty()) check_position_range();
    if (errors_.empty()) check_table();
    if (errors_.empty()) check_cos_sin_cache();
    if (errors_.empty()) check_kv_cache();
    check_freqs();
    check_backward();
    if (!errors_.empty()) return errors_;
    build_views();
    check_memory_of_views();
    if (!errors_.empty()) return errors_;
    return std::move(p_);
  }

 private:
  // Every tensor of a call is where q is: device kernels take device
  // tensors, host kernels host ones; the caller's pointers are never read
  // on the wrong side.
  void check_devices() {
    for_each_tensor([&](const Tensor& t, const char* name) {
      if (t.device != q_.device)
        errors_.push_back(
            named_error(name, fmt::format("{} is on {}:{} but {} is on {}:{}: a call's tensors share one device", name,
                                          to_string(t.device.type), t.device.id, input_name(c_),
                                          to_string(q_.device.type), q_.device.id)));
    });
    on_device_ = q_.device.type != DeviceType::CPU;
  }

  template <typename F>
  void for_each_tensor(F f) {
    f(q_, input_name(c_));
    f(out_q_, output_name(c_));
    if (k_) f(*k_, "k");
    if (out_k_) f(*out_k_, "out_k");
    const std::pair<const std::optional<Tensor>*, const char*> rest[] = {
        {&call_.positions, "positions"}, {&call_.cu_seqlens, "cu_seqlens"}, {&call_.table, "table"},
        {&call_.freqs, "freqs"},         {&call_.cos_sin_cache, "cos_sin_cache"},
        {&call_.saved_q, "saved_q"},     {&call_.saved_k, "saved_k"},       {&call_.d_freqs, "d_freqs"},
        {&call_.v, "v"},                 {&call_.k_cache, "k_cache"},       {&call_.v_cache, "v_cache"},
        {&call_.kv_indices, "kv_indices"}, {&call_.kv_indptr, "kv_indptr"}, {&call_.batch_indices, "batch_indices"},
        {&call_.slot_mapping, "slot_mapping"}, {&call_.cache_positions, "cache_positions"}};
    for (auto [t, name] : rest)
      if (*t) f(**t, name);
  }

  void check_types() {
    const ElementType spec_type = element_type(c_);
    // `why` is fmt-formatted with `type` only when the dtype is wrong (no
    // string is built on the success path).
    auto want = [&](const Tensor& t, const char* name, ElementType type, const char* why) {
      if (t.type != type)
        errors_.push_back(
            named_error(name, fmt::format("{} has dtype {} but {} ({})", name, to_string(t.type), to_string(type),
                                          fmt::format(fmt::runtime(why), to_string(type)))));
    };
    const char* spec_dtype = "the spec's dtype is {}";
    want(q_, input_name(c_), spec_type, spec_dtype);
    want(out_q_, output_name(c_), spec_type, spec_dtype);
    if (k_) want(*k_, "k", spec_type, spec_dtype);
    if (out_k_) want(*out_k_, "out_k", spec_type, spec_dtype);
    if (call_.v) want(*call_.v, "v", spec_type, spec_dtype);
    if (has_kv_cache(c_)) {
      // fp8 codes are uint8 arrays: the message says so (a string only for fp8 specs).
      std::string fp8_dtype;
      if (const char* fp8 = kv_fp8_name(c_))
        fp8_dtype = fmt::format("the spec's kv_cache dtype is {}, whose codes are stored as {{}}", fp8);
      const char* cache_dtype = fp8_dtype.empty() ? "the spec's kv_cache dtype is {}" : fp8_dtype.c_str();
      for (auto [t, name] : {std::pair{&call_.k_cache, "k_cache"}, std::pair{&call_.v_cache, "v_cache"}})
        if (*t) want(**t, name, kv_element_type(c_), cache_dtype);
      for (auto [t, name] : {std::pair{&call_.kv_indices, "kv_indices"}, std::pair{&call_.kv_indptr, "kv_indptr"},
                             std::pair{&call_.batch_indices, "batch_indices"},
                             std::pair{&call_.slot_mapping, "slot_mapping"},
                             std::pair{&call_.cache_positions, "cache_positions"}})
        if (*t) want(**t, name, ElementType::Int32, "cache indices are int32");
    }
    for (auto [t, name] : {std::pair{&call_.table, "table"}, std::pair{&call_.saved_q, "saved_q"},
                           std::pair{&call_.saved_k, "saved_k"}})
      if (*t) want(**t, name, spec_type, spec_dtype);
    for (auto [t, name] : {std::pair{&call_.freqs, "freqs"}, std::pair{&call_.d_freqs, "d_freqs"}})
      if (*t) want(**t, name, ElementType::Float32, "frequencies are float32");
    if (call_.cos_sin_cache)
      want(*call_.cos_sin_cache, "cos_sin_cache", ElementType::Float32, "a cos/sin cache is float32, whatever the spec's dtype");
    for (auto [t, name] : {std::pair{&call_.positions, "positions"}, std::pair{&call_.cu_seqlens, "cu_seqlens"}})
      if (*t && !is_id_type((*t)->type))
        errors_.push_back(
            named_error(name, fmt::format("{} has dtype {}: ids must be int32 or int64", name, to_string((*t)->type))));
  }

  // The last dim a tensor of the spec has, and what it is called.
  std::pair<int64_t, const char*> row_dim() const {
    switch (encoding(c_)) {
      case Encoding::Rope: return {c_.row_dim, "head_dim"};
      case Encoding::Sinusoidal: case Encoding::Learned: return {c_.row_dim, "dim"};
      case Encoding::Alibi: return {-1, "Sk"};  // any key count
    }
    return {0, ""};
  }

  void check_tensor(const Tensor& t, const char* name) {
    const bool alibi = encoding(c_) == Encoding::Alibi;
    if (t.rank != traits_.rank) {
      errors_.push_back(
          named_error(name, fmt::format("{} has shape {} but {} needs {} dims {}", name, shape_str(t),
                                        alibi ? "alibi (attention scores)" : fmt::format("layout {}", traits_.name),
                                        traits_.rank, alibi ? "[B, H, Sq, Sk]" : traits_.dims)));
      return;
    }
    const auto [want_d, d_name] = row_dim();
    const int64_t d = t.shape[t.rank - 1];
    if (want_d > 0 && d != want_d) {
      std::string hint;
      if (is_rope(c_) && d * 2 == want_d)
        hint = fmt::format("; it looks like cos/sin-sized data (head_dim / 2 = {}): pass the whole head", d);
      else if (is_rope(c_) && d == c_.rotary_dim)
        hint = "; it looks like only the rotary part: pass the whole head (rotary_offset/rotary_dim select the part)";
      Shape want = shape_of(t);
      want.back() = want_d;
      errors_.push_back(
          named_error(name, fmt::format("{} has shape {} but the spec's {} is {}: expected {} (last dim = {}){}", name,
                                        shape_str(t), d_name, want_d, shape_str(want), d_name, hint)));
    }
    if (alibi && t.shape[1] != c_.num_heads) {
      Shape want = shape_of(t);
      want[1] = c_.num_heads;
      errors_.push_back(
          named_error(name, fmt::format("{} has shape {} but the spec has num_heads {}: expected {} ([B, H, Sq, "
                                        "Sk], H = num_heads)",
                                        name, shape_str(t), c_.num_heads, shape_str(want))));
    }
    for (int i = 0; i < t.rank; ++i)
      if (t.shape[i] < 0 || t.shape[i] > INT32_MAX) {  // 0: an empty tensor, nothing to do
        errors_.push_back(
            named_error(name, fmt::format("{} has shape {}: every dim must be in 0..2^31-1", name, shape_str(t))));
        break;
      }
  }

  // Outputs have their input's shape.
  void check_like(const Tensor& out, const char* name, const Tensor& in, const char* in_name) {
    if (shape_of(out) != shape_of(in))
      errors_.push_back(named_error(name, fmt::format("{} has shape {} but {} has {}: an output has its input's shape",
                                                      name, shape_str(out), in_name, shape_str(in))));
  }

  void check_k() {
    const int hd = traits_.h;
    Shape qs = shape_of(q_), ks = shape_of(*k_);
    qs[hd] = ks[hd] = 0;
    if (qs == ks) return;
    Shape want = shape_of(q_);
    want[hd] = k_->shape[hd];
    errors_.push_back(
        named_error("k", fmt::format("k has shape {} but q has {}: k may differ from q only in its number of "
                                     "heads (expected {})",
                                     shape_str(*k_), shape_str(q_), shape_str(want))));
  }

  int64_t sequence_tokens() const { return q_.shape[traits_.s]; }

  void check_positions() {
    const bool alibi = encoding(c_) == Encoding::Alibi;
    if (!c_.explicit_positions) {
      if (call_.positions)
        errors_.push_back(
            named_error("positions", alibi ? "alibi takes no position ids: query row r sits at offset + r, key j "
                                             "at j (pass offset)"
                                           : "the spec has `positions: implicit` (offset + index): pass offset, "
                                             "or set `positions: explicit` in the spec to pass ids"));
      return;
    }
    // Multi-axis ids carry a trailing axis dim.
    Shape want = tokens_, shared = {sequence_tokens()};
    std::string axes_note;
    if (c_.position_axes > 0) {
      want.push_back(c_.position_axes);
      shared.push_back(c_.position_axes);
      axes_note = fmt::format(" plus a trailing dim of {} (one id per axis)", c_.position_axes);
    }
    if (!call_.positions) {
      errors_.push_back(
          named_error("positions", fmt::format("the spec has `positions: explicit`: pass position ids shaped {} "
                                               "(or {} shared by the batch)",
                                               shape_str(want), shape_str(shared))));
      return;
    }
    const Tensor& p = *call_.positions;
    if (shape_of(p) != want && shape_of(p) != shared) {
      errors_.push_back(
          named_error("positions", fmt::format("positions have shape {} but {} {} in layout {} needs {} (the token "
                                               "dims{}) or {} shared by the batch",
                                               shape_str(p), input_name(c_), shape_str(q_), traits_.name,
                                               shape_str(want), axes_note, shape_str(shared))));
      return;
    }
    for (int i = 0; i < p.rank; ++i) {
      int64_t span = 0;
      if (p.shape[i] > 1 && (__builtin_mul_overflow(p.shape[i] - 1, p.strides[i] < 0 ? -p.strides[i] : p.strides[i], &span) ||
                             span > INT32_MAX)) {
        errors_.push_back(
            named_error("positions", fmt::format("positions' dim {} ({} ids, {} apart) spans more than a kernel "
                                                 "call can address (2^31-1 ids): pass dense ids",
                                                 i, p.shape[i], p.strides[i])));
        return;
      }
    }
  }

  // Whether the kernels read cu_seqlens: packed layouts with implicit
  // positions (each sequence restarts at offset).
  bool kernel_reads_cu_seqlens() const { return traits_.packed() && !c_.explicit_positions; }

  void check_cu_seqlens() {
    // A device call's kernels read the caller's starts as they are.
    const bool from_device = on_device_ && kernel_reads_cu_seqlens();
    if (!call_.cu_seqlens) {
      if (from_device)
        errors_.push_back(
            named_error("cu_seqlens", fmt::format("a device call in layout {} with implicit positions needs "
                                                  "cu_seqlens (int32 [num_sequences + 1], on the device; [0, T] "
                                                  "for one sequence): the kernels read the sequence starts there",
                                                  traits_.name)));
      return;
    }
    const Tensor& cu = *call_.cu_seqlens;
    if (!traits_.packed()) {
      errors_.push_back(named_error("cu_seqlens", "cu_seqlens only applies to packed layouts (thd, td)"));
      return;
    }
    const int64_t T = q_.shape[traits_.s];
    bool valid = cu.rank == 1 && cu.shape[0] >= 2 && cu.shape[0] <= INT32_MAX;
    for (int64_t i = 0; valid && !on_device_ && i < cu.shape[0]; ++i) {
      const int64_t start = id_at(cu, i);
      valid = (i > 0 || start == 0) && (i == 0 || start >= id_at(cu, i - 1)) && (i + 1 < cu.shape[0] || start == T);
    }
    if (!valid)
      errors_.push_back(
          named_error("cu_seqlens", fmt::format("cu_seqlens (shape {}) must be num_sequences + 1 starts from 0, "
                                                "never decreasing, ending at T = {} (the tokens in {})",
                                                shape_str(cu), T, input_name(c_))));
    else if (from_device && cu.type != ElementType::Int32)
      errors_.push_back(
          named_error("cu_seqlens", fmt::format("cu_seqlens has dtype {}: a device call passes int32 cu_seqlens "
                                                "(the kernels read int32 starts; converting these would read "
                                                "device memory)",
                                                to_string(cu.type))));
  }

  // Explicit ids, or offset + index along the longest sequence (packed:
  // restarting at every cu_seqlens start; alibi: the query rows).
  Result<PositionRange> position_range() const {
    if (call_.positions) {
      const Tensor& p = *call_.positions;
      const int64_t n = p.elements();
      return n == 0 ? PositionRange{} : id_range(p, n);
    }
    int64_t longest = sequence_tokens();
    if (traits_.packed() && call_.cu_seqlens) {
      longest = 0;
      for (int64_t i = 0; i + 1 < call_.cu_seqlens->shape[0]; ++i)
        longest = std::max(longest, id_at(*call_.cu_seqlens, i + 1) - id_at(*call_.cu_seqlens, i));
    }
    int64_t last = call_.offset;
    if (longest > 0 && __builtin_add_overflow(call_.offset, longest - 1, &last))
      return named_error("offset", fmt::format("offset {} + {} tokens overflows int64", call_.offset, longest));
    return PositionRange{call_.offset, last};
  }

  // One check for every encoding: ids, offset + index, ALiBi query rows.
  // A device call's ids and sequence lengths (cu_seqlens) are on the
  // device: only what the host knows is checked then (implicit positions
  // start at offset), and the range stays unknown.
  void check_position_range() {
    range_known_ = !on_device_ || (!call_.positions && !(traits_.packed() && call_.cu_seqlens));
    if (on_device_ && call_.positions) return;
    const Result<PositionRange> range = range_known_ ? position_range() : PositionRange{call_.offset, call_.offset};
    if (!range) {
      errors_.insert(errors_.end(), range.errors().begin(), range.errors().end());
      return;
    }
    range_ = *range;
    const bool ids = call_.positions.has_value();
    const char* what = ids ? "position id" : "position (offset + index)";
    if (range->first < 0)
      errors_.push_back(
          named_error(ids ? "positions" : "offset",
                      fmt::format("{} {} is negative: positions must be in 0..2^53", what, range->first)));
    else if (range->last > kMaxPosition)
      errors_.push_back(
          named_error(ids ? "positions" : "offset",
                      fmt::format("{} {} is out of range: positions must be in 0..2^53 ({}){}", what, range->last,
                                  kMaxPosition, ids ? "" : fmt::format("; the offset is {}", call_.offset))));
  }

  void check_table() {
    const int64_t dim = c_.row_dim;
    if (encoding(c_) != Encoding::Learned) {
      if (call_.table)
        errors_.push_back(
            named_error("table", fmt::format("table is for `encoding: learned`; this spec is {}", encoding_name(c_))));
      return;
    }
    if (!call_.table) {
      errors_.push_back(named_error(
          "table", fmt::format("`encoding: learned` adds rows of a table: pass it shaped (max_len, {})", dim)));
      return;
    }
    const Tensor& t = *call_.table;
    int64_t elements = 0;
    if (t.rank != 2 || t.shape[1] != dim || t.shape[0] < 1 || __builtin_mul_overflow(t.shape[0], dim, &elements) ||
        elements > INT32_MAX) {
      errors_.push_back(
          named_error("table", fmt::format("table has shape {} but must be (max_len, {}) (dim = {}) with at most "
                                           "2^31-1 elements",
                                           shape_str(t), dim, dim)));
      return;
    }
    if ((dim > 1 && t.strides[1] != 1) || (t.shape[0] > 1 && t.strides[0] != dim)) {
      errors_.push_back(
          named_error("table", fmt::format("table must be a dense (max_len, {}) tensor (its strides are ({}, {}))", dim,
                                           t.strides[0], t.strides[1])));
      return;
    }
    if (range_known_ && range_.last >= t.shape[0])
      errors_.push_back(
          named_error("table", fmt::format("position {} is outside the table: it has {} rows (positions 0..{}); "
                                           "pass a longer table or smaller positions",
                                           range_.last, t.shape[0], t.shape[0] - 1)));
  }

  // Frequency scheme table: cos and sin of every position a call reads, as
  // engines keep them ([max_pos, rotary_dim], row p = [cos | sin]).
  void check_cos_sin_cache() {
    const int64_t dim = c_.rotary_dim;
    if (!c_.table_frequencies) {
      if (call_.cos_sin_cache)
        errors_.push_back(named_error("cos_sin_cache",
                                      "cos_sin_cache is for specs with `frequency: {scheme: table}`; this "
                                      "spec computes its cos and sin"));
      return;
    }
    if (!call_.cos_sin_cache) {
      errors_.push_back(
          named_error("cos_sin_cache", fmt::format("the spec has `frequency: {{scheme: table}}`: pass "
                                                   "cos_sin_cache, float32 shaped (max_pos, {}) (row p: cos of "
                                                   "the {} pairs at position p, then their sin)",
                                                   dim, dim / 2)));
      return;
    }
    const Tensor& t = *call_.cos_sin_cache;
    int64_t span = 0;
    const bool fits = t.rank == 2 && t.shape[1] == dim && t.shape[0] >= 1 && t.shape[0] <= INT32_MAX &&
                      !__builtin_mul_overflow(t.shape[0] - 1, t.strides[0] < 0 ? -t.strides[0] : t.strides[0], &span) &&
                      span <= INT32_MAX - dim;
    if (!fits) {
      errors_.push_back(named_error("cos_sin_cache", fmt::format("cos_sin_cache has shape {} but must be (max_pos, {}) "
                                                                 "(rotary_dim = {}), spanning at most 2^31-1 elements",
                                                                 shape_str(t), dim, dim)));
      return;
    }
    if (t.strides[1] != 1) {
      errors_.push_back(
          named_error("cos_sin_cache", fmt::format("cos_sin_cache's last dim must be contiguous (stride 1, not "
                                                   "{}); its rows may be any distance apart",
                                                   t.strides[1])));
      return;
    }
    if (range_known_ && range_.last >= t.shape[0]) {
      const bool ids = call_.positions.has_value();
      errors_.push_back(named_error(
          "cos_sin_cache", fmt::format("{} {} is outside cos_sin_cache: it has {} rows (positions "
                                       "0..{}){}; pass a longer cache or smaller positions",
                                       ids ? "position id" : "position (offset + index)", range_.last, t.shape[0],
                                       t.shape[0] - 1, ids ? "" : fmt::format(", the offset is {}", call_.offset))));
    }
  }

  // The fused KV-cache append: FlashInfer's append_paged_kv_cache (page.cuh:
  // token t of request b = batch_indices[t] at p = positions[t] goes to page
  // kv_indices[kv_indptr[b] + p / page_size], entry p % page_size) and
  // vLLM's reshape_and_cache (slot_mapping[t]; negative: padding). Every
  // entry a token goes to is checked here: the kernels clamp, never check.
  void check_kv_cache() {
    const std::pair<const std::optional<Tensor>*, const char*> args[] = {
        {&call_.v, "v"},
        {&call_.k_cache, "k_cache"},
        {&call_.v_cache, "v_cache"},
        {&call_.kv_indices, "kv_indices"},
        {&call_.kv_indptr, "kv_indptr"},
        {&call_.batch_indices, "batch_indices"},
        {&call_.slot_mapping, "slot_mapping"},
        {&call_.cache_positions, "cache_positions"}};
    check_scales();
    if (!has_kv_cache(c_)) {
      for (auto [t, name] : args)
        if (*t)
          errors_.push_back(named_error(name, fmt::format("{} is for specs with a kv_cache section (the fused KV-cache "
                                                          "append); this spec has none",
                                                          name)));
      return;
    }
    const bool paged = kv_layout(c_) != KvLayout::Contiguous;
    if (call_.backward)
      errors_.push_back(named_error("backward", "a spec with kv_cache has no backward kernel (it appends to a cache)"));
    if (!k_) {
      errors_.push_back(
          named_error("k", "the spec appends to a KV cache: pass k ([T, Hk, head_dim]); it is rotated into k_cache"));
      return;
    }
    const int64_t T = q_.shape[0], Hk = k_->shape[1];
    // The cache rows read k as it came; an out_k over it could be written first.
    if (out_k_ && out_k_->data == k_->data)
      errors_.push_back(named_error("out_k",
                                    "out_k is k (in place), but the cache rows are rotated from k as it came: pass "
                                    "a separate out_k, or leave out_k out (k is then not written)"));
    if (!call_.k_cache)
      errors_.push_back(named_error("k_cache", fmt::format("the spec appends to a KV cache: pass k_cache shaped {}",
                                                           cache_shape("pages", Hk, c_.row_dim))));
    if (call_.v && !call_.v_cache)
      errors_.push_back(named_error("v_cache", "v is given without v_cache: pass the cache v is appended to"));
    if (call_.v_cache && !call_.v)
      errors_.push_back(
          named_error("v", "v_cache is given without v: pass v ([T, Hk, Dv]) or leave v_cache out (MLA)"));
    for (auto [t, name, wanted] : {std::tuple{&call_.kv_indices, "kv_indices", paged},
                                   std::tuple{&call_.kv_indptr, "kv_indptr", paged},
                                   std::tuple{&call_.batch_indices, "batch_indices", paged},
                                   std::tuple{&call_.slot_mapping, "slot_mapping", !paged}}) {
      if (wanted && !*t)
        errors_.push_back(named_error(
            name, fmt::format("the spec's kv_cache layout is {}: pass {} ({})", kv_layout_name(), name,
                              paged ? "kv_indices, kv_indptr and batch_indices" : "int32 [T], a slot per token")));
      else if (!wanted && *t)
        errors_.push_back(
            named_error(name, fmt::format("{} is for {} caches; the spec's kv_cache layout is {} (pass {})", name,
                                          paged ? "contiguous" : "paged", kv_layout_name(),
                                          paged ? "kv_indices, kv_indptr and batch_indices" : "slot_mapping")));
    }
    if (!paged && call_.cache_positions)
      errors_.push_back(named_error("cache_positions",
                                    "cache_positions is for paged caches; the spec's kv_cache layout is "
                                    "contiguous (slot_mapping places the tokens)"));
    if (!errors_.empty()) return;
    if (call_.v) {
      const Tensor& v = *call_.v;
      if (v.rank != 3 || v.shape[0] != T || v.shape[1] != Hk || v.shape[2] < 1 || v.shape[2] > INT32_MAX) {
        errors_.push_back(
            named_error("v", fmt::format("v has shape {} but must be (T, Hk, Dv) = ({}, {}, Dv): k's tokens and "
                                         "heads, any row size",
                                         shape_str(v), T, Hk)));
        return;
      }
    }
    int64_t pages = 0;
    if (!check_cache(*call_.k_cache, "k_cache", Hk, c_.row_dim, &pages)) return;
    if (call_.v) {
      int64_t v_pages = 0;
      if (!check_cache(*call_.v_cache, "v_cache", Hk, call_.v->shape[2], &v_pages)) return;
      if (v_pages != pages) {
        errors_.push_back(
            named_error("v_cache", fmt::format("v_cache has {} {} but k_cache has {}: they are indexed alike", v_pages,
                                               paged ? "pages" : "slots", pages)));
        return;
      }
    }
    if (paged) check_page_table(T, pages);
    else check_slot_mapping(T, pages);
  }

  // fp8 caches divide by the call's scales (vLLM's k_scale, v_scale);
  // other caches store values as they are and take none.
  void check_scales() {
    for (auto [scale, name] : {std::pair{&call_.k_scale, "k_scale"}, std::pair{&call_.v_scale, "v_scale"}}) {
      if (!*scale) continue;
      const float s = **scale;
      if (!has_kv_cache(c_))
        errors_.push_back(
            named_error(name, fmt::format("{} is for fp8 KV caches; this spec has no kv_cache section", name)));
      else if (!kv_fp8_name(c_))
        errors_.push_back(
            named_error(name, fmt::format("{} is for fp8 KV caches; the spec's kv_cache dtype {} stores values "
                                          "as they are: leave {} out",
                                          name, to_string(kv_element_type(c_)), name)));
      else if (!std::isfinite(s) || !(s > 0))
        errors_.push_back(
            named_error(name, fmt::format("{} ({}) must be finite and > 0: the {} cache holds the {} codes of "
                                          "x / {}",
                                          name, s, name[0] == 'k' ? "k" : "v", kv_fp8_name(c_), name)));
      else if (name[0] == 'v' && !call_.v)
        errors_.push_back(named_error(name,
                                      "v_scale is given without v: it scales v's rows in v_cache (pass v and "
                                      "v_cache, or leave v_scale out)"));
    }
  }

  const char* kv_layout_name() const {
    switch (kv_layout(c_)) {
      case KvLayout::PagedNhd: return "paged_nhd";
      case KvLayout::PagedHnd: return "paged_hnd";
      case KvLayout::Contiguous: return "contiguous";
    }
    return "?";
  }

  // The shape a cache has in the spec's kv_cache layout, for messages.
  std::string cache_shape(const std::string& pages, int64_t heads, int64_t dim) const {
    switch (kv_layout(c_)) {
      case KvLayout::PagedNhd: return fmt::format("({}, {}, {}, {}) ([pages, page_size, Hk, D])", pages, c_.kv_page_size, heads, dim);
      case KvLayout::PagedHnd: return fmt::format("({}, {}, {}, {}) ([pages, Hk, page_size, D])", pages, heads, c_.kv_page_size, dim);
      case KvLayout::Contiguous: return fmt::format("({}, {}, {}) ([num_slots, Hk, D])", pages == "pages" ? "num_slots" : pages, heads, dim);
    }
    return "?";
  }

  // A cache's shape for `heads` heads of `dim`, its pages (or slots), and
  // that one kernel argument addresses all of it.
  bool check_cache(const Tensor& t, const char* name, int64_t heads, int64_t dim, int64_t* pages) {
    const bool contiguous = kv_layout(c_) == KvLayout::Contiguous;
    const int rank = contiguous ? 3 : 4;
    Shape want;
    if (t.rank == rank) {
      if (kv_layout(c_) == KvLayout::PagedNhd) want = {t.shape[0], c_.kv_page_size, heads, dim};
      else if (kv_layout(c_) == KvLayout::PagedHnd) want = {t.shape[0], heads, c_.kv_page_size, dim};
      else want = {t.shape[0], heads, dim};
    }
    const bool ok = t.rank == rank && t.shape[0] >= 1 && t.shape[0] <= INT32_MAX && shape_of(t) == want;
    if (!ok) {
      errors_.push_back(named_error(
          name, fmt::format("{} has shape {} but the spec's kv_cache layout {} needs {}", name, shape_str(t),
                            kv_layout_name(), cache_shape(contiguous ? "num_slots" : "pages", heads, dim))));
      return false;
    }
    int64_t span = 0;
    for (int i = 0; i < t.rank; ++i) {
      int64_t far = 0;
      if (t.shape[i] > 1 && (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i] < 0 ? -t.strides[i] : t.strides[i], &far) ||
                             __builtin_add_overflow(span, far, &span))) {
        span = INT64_MAX;
        break;
      }
    }
    if (span >= INT32_MAX) {
      errors_.push_back(
          named_error(name, fmt::format("{} spans more than the 2^31-1 elements a kernel call can address", name)));
      return false;
    }
    *pages = t.shape[0];
    return true;
  }

  // A one-dim int32 index tensor of `n` entries (n < 0: any).
  bool check_index_vector(const Tensor& t, const char* name, int64_t n, const char* what) {
    if (t.rank != 1 || (n >= 0 && t.shape[0] != n) || t.shape[0] > INT32_MAX) {
      errors_.push_back(
          named_error(name, fmt::format("{} has shape {} but must be {}", name, shape_str(t),
                                        n >= 0 ? fmt::format("({},) ({})", n, what) : std::string(what))));
      return false;
    }
    return true;
  }

  // Token t's position (thd: positions [T]).
  int64_t position_of(int64_t t) const { return id_at(*call_.positions, t); }

  // No two appended tokens write one cache entry (which would be a race).
  // Entries are page * page_size + entry (paged), or slots (page_size 0).
  void check_distinct(std::vector<std::pair<int64_t, int64_t>>& entry_token, const char* name, int64_t page_size) {
    std::sort(entry_token.begin(), entry_token.end());
    for (size_t i = 1; i < entry_token.size(); ++i)
      if (entry_token[i].first == entry_token[i - 1].first) {
        const int64_t at = entry_token[i].first;
        errors_.push_back(named_error(
            name, fmt::format("tokens {} and {} both go to {}: each cache entry takes at most one "
                              "token of a call",
                              entry_token[i - 1].second, entry_token[i].second,
                              page_size > 0 ? fmt::format("page {}, entry {}", at / page_size, at % page_size)
                                            : fmt::format("slot {}", at))));
        return;
      }
  }

  void check_page_table(int64_t T, int64_t pages) {
    const Tensor &indptr = *call_.kv_indptr, &indices = *call_.kv_indices, &batch = *call_.batch_indices;
    if (!check_index_vector(indptr, "kv_indptr", -1, "(B + 1,): the first page of each request in kv_indices, then the end") ||
        !check_index_vector(indices, "kv_indices", -1, "(n,): the pages of every request") ||
        !check_index_vector(batch, "batch_indices", T, "the request of each token") ||
        (call_.cache_positions &&
         !check_index_vector(*call_.cache_positions, "cache_positions", T, "where each token goes in its request's cache")))
      return;
    const int64_t B = indptr.shape[0] - 1, n = indices.shape[0];
    if (B < 1) {
      errors_.push_back(named_error(
          "kv_indptr", fmt::format("kv_indptr has shape {}: it needs B + 1 >= 2 entries", shape_str(indptr))));
      return;
    }
    // A device call's page table is the caller's to keep valid; the kernels
    // read int32 places (cache_positions, else positions).
    if (on_device_) {
      if (!call_.cache_positions && call_.positions->type != ElementType::Int32)
        errors_.push_back(named_error("cache_positions",
                                      "a device call with int64 positions passes cache_positions (int32 "
                                      "[T], each token's place in its request's cache): the kernels read "
                                      "int32 places, and converting the positions would read device "
                                      "memory"));
      return;
    }
    for (int64_t b = 0; b <= B; ++b) {
      const int64_t at = id_at(indptr, b);
      if (at < 0 || at > n || (b > 0 && at < id_at(indptr, b - 1))) {
        errors_.push_back(
            named_error("kv_indptr", fmt::format("kv_indptr[{}] is {}: kv_indptr must never decrease and stay "
                                                 "within kv_indices (0..{})",
                                                 b, at, n)));
        return;
      }
    }
    for (int64_t i = id_at(indptr, 0); i < id_at(indptr, B); ++i) {
      const int64_t page = id_at(indices, i);
      if (page < 0 || page >= pages) {
        errors_.push_back(named_error(
            "kv_indices",
            fmt::format("kv_indices[{}] is {}, outside k_cache's {} pages (0..{})", i, page, pages, pages - 1)));
        return;
      }
    }
    const int64_t ps = c_.kv_page_size;
    std::vector<std::pair<int64_t, int64_t>> entries;
    placement_.assign(T, 0);  // tokens not appended: never read
    for (int64_t t = 0; t < T; ++t) {
      const int64_t b = id_at(batch, t);
      if (b < 0) continue;
      if (b >= B) {
        errors_.push_back(
            named_error("batch_indices", fmt::format("batch_indices[{}] is {} but kv_indptr has {} requests "
                                                     "(0..{}; negative: not appended)",
                                                     t, b, B, B - 1)));
        return;
      }
      // Where the token goes: cache_positions, else the position it is rotated by.
      const char* placed_by = call_.cache_positions ? "cache_positions" : "positions";
      const int64_t p = call_.cache_positions ? id_at(*call_.cache_positions, t) : position_of(t);
      const int64_t first = id_at(indptr, b), count = id_at(indptr, b + 1) - first;
      if (p < 0) {  // positions are checked >= 0 already
        errors_.push_back(
            named_error(placed_by, fmt::format("cache_positions[{}] is {}: a token's place in its request's "
                                               "cache is >= 0",
                                               t, p)));
        return;
      }
      if (p / ps >= count) {
        errors_.push_back(
            named_error(placed_by, fmt::format("token {} (request {}) is at {} {}, in page {} of its request, but "
                                               "the request has {} pages (kv_indptr[{}..{}] = {}..{}, page_size {})",
                                               t, b, call_.cache_positions ? "cache position" : "position", p, p / ps,
                                               count, b, b + 1, first, first + count, ps)));
        return;
      }
      // The kernels read int32 cache positions (as FlashInfer's).
      if (p > INT32_MAX) {
        errors_.push_back(
            named_error(placed_by, fmt::format("token {} is at {} {}: cache positions are int32 (at most {})", t,
                                               call_.cache_positions ? "cache position" : "position", p, INT32_MAX)));
        return;
      }
      placement_[t] = static_cast<int32_t>(p);
      entries.push_back({id_at(indices, first + p / ps) * ps + p % ps, t});
    }
    check_distinct(entries, "batch_indices", ps);
  }

  void check_slot_mapping(int64_t T, int64_t slots) {
    const Tensor& m = *call_.slot_mapping;
    if (!check_index_vector(m, "slot_mapping", T, "a slot per token") || on_device_) return;  // device: the caller's
    std::vector<std::pair<int64_t, int64_t>> entries;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t s = id_at(m, t);
      if (s < 0) continue;
      if (s >= slots) {
        errors_.push_back(
            named_error("slot_mapping", fmt::format("slot_mapping[{}] is {}, outside k_cache's {} slots (0..{}; "
                                                    "negative: not appended)",
                                                    t, s, slots, slots - 1)));
        return;
      }
      entries.push_back({s, t});
    }
    check_distinct(entries, "slot_mapping", 0);
  }

  // A cache as (d, h, entry, page); a contiguous cache's slots are pages of one entry.
  View cache_view(const Tensor& t) const {
    View v;
    v.data = t.data, v.type = t.type, v.dims = 4;
    switch (kv_layout(c_)) {
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

  static View index_view(const Tensor& t) {
    View v;
    v.data = t.data, v.type = t.type, v.dims = 1;
    v.extent[0] = t.shape[0], v.stride[0] = t.shape[0] > 1 ? t.strides[0] : 1;
    return v;
  }

  // A run-time frequency vector: [rotary_dim / 2], contiguous.
  bool check_vector(const Tensor& t, const char* name) {
    const Shape want = {c_.rotary_dim / 2};
    if (shape_of(t) != want) {
      errors_.push_back(named_error(name, fmt::format("{} has shape {} but the spec needs {} (rotary_dim / 2)", name,
                                                      shape_str(t), shape_str(want))));
      return false;
    }
    if (t.shape[0] > 1 && t.strides[0] != 1) {
      errors_.push_back(named_error(name, fmt::format("{} must be contiguous (stride 1, not {})", name, t.strides[0])));
      return false;
    }
    return true;
  }

  void check_freqs() {
    if (!c_.runtime_frequencies) {
      if (call_.freqs)
        errors_.push_back(named_error("freqs", "freqs are for specs with `frequency: {scheme: runtime}`"));
      return;
    }
    if (!call_.freqs) {
      errors_.push_back(
          named_error("freqs", fmt::format("the spec has `frequency: {{scheme: runtime}}`: pass inv_freq shaped "
                                           "({},)",
                                           c_.rotary_dim / 2)));
      return;
    }
    if (!check_vector(*call_.freqs, "freqs") || on_device_) return;  // device: the caller's to keep finite
    // The bound every spec's frequencies obey (kMaxInvFreq: the kernels
    // count quarter turns of position * inv_freq in an int64); NaN or inf
    // would turn every output into NaN without a word.
    const auto* f = static_cast<const float*>(call_.freqs->data);
    for (int64_t i = 0; i < call_.freqs->shape[0]; ++i)
      if (!(std::fabs(f[i]) <= kMaxInvFreq)) {
        errors_.push_back(
            named_error("freqs", fmt::format("freqs[{}] is {}: run-time frequencies must be finite and at most {} "
                                             "in magnitude (radians per position)",
                                             i, f[i], kMaxInvFreq)));
        return;
      }
  }

  void check_backward() {
    if (call_.backward && !is_rope(c_))
      errors_.push_back(named_error(
          "backward", fmt::format("backward kernels are for rope specs; this spec is {}", encoding_name(c_))));
    const bool gradient = call_.backward && c_.runtime_frequencies;
    if (!gradient) {
      if (call_.saved_q || call_.saved_k)
        errors_.push_back(
            named_error(call_.saved_q ? "saved_q" : "saved_k",
                        "saved forward inputs are only read by the backward of a spec with `frequency: {scheme: "
                        "runtime}` (for dL/d(inv_freq))"));
      if (call_.d_freqs)
        errors_.push_back(named_error("d_freqs",
                                      "d_freqs (dL/d(inv_freq)) is only written by the backward of a spec with "
                                      "`frequency: {scheme: runtime}`"));
      return;
    }
    auto check_saved = [&](const std::optional<Tensor>& s, const std::optional<Tensor>& like, const char* name,
                           const char* like_name) {
      if (!like) {
        if (s)
          errors_.push_back(
              named_error(name, fmt::format("{} is given without the gradient {} it belongs to", name, like_name)));
        return;
      }
      if (!s)
        errors_.push_back(
            named_error(name, fmt::format("the backward of run-time frequencies needs the forward input {} "
                                          "(shaped {}) for dL/d(inv_freq)",
                                          name, shape_str(*like))));
      else if (shape_of(*s) != shape_of(*like))
        errors_.push_back(named_error(name, fmt::format("{} has shape {} but its gradient {} has {}: they must match",
                                                        name, shape_str(*s), like_name, shape_str(*like))));
    };
    check_saved(call_.saved_q, call_.q, "saved_q", "q");
    check_saved(call_.saved_k, call_.k, "saved_k", "k");
    if (call_.d_freqs) check_vector(*call_.d_freqs, "d_freqs");
  }

  // A tensor of the layout as (d, h, s, b): absent dims (one head, one
  // batch) have extent 1.
  View tensor_view(const Tensor& t) const {
    View v;
    v.data = t.data, v.type = t.type, v.dims = 4;
    const int at[4] = {traits_.d, traits_.h, traits_.s, traits_.b};
    for (int i = 0; i < 4; ++i) {
      v.extent[i] = at[i] < 0 ? 1 : t.shape[at[i]];
      v.stride[i] = at[i] < 0 ? 0 : t.strides[at[i]];
    }
    return v;
  }

  // Ids as (s, b), multi-axis (axis, s, b); [S] shared by the batch has a
  // batch stride of 0.
  View positions_view(const Tensor& p) const {
    View v;
    v.data = p.data, v.type = p.type;
    const int axes = c_.position_axes;
    const int token_rank = p.rank - (axes > 0 ? 1 : 0);
    FixedVector<std::pair<int64_t, int64_t>, 3> dims;  // (extent, stride)
    if (axes > 0) dims.push_back({axes, p.strides[p.rank - 1]});
    const int64_t batch = traits_.batch(q_.shape.data());
    if (token_rank == 1) {
      dims.push_back({p.shape[0], p.strides[0]});
      dims.push_back({batch, 0});
    } else {
      const bool seq_first = traits_.s < traits_.b;  // [S, B]
      dims.push_back({p.shape[seq_first ? 0 : 1], p.strides[seq_first ? 0 : 1]});
      dims.push_back({p.shape[seq_first ? 1 : 0], p.strides[seq_first ? 1 : 0]});
    }
    v.dims = static_cast<int>(dims.size());
    for (int i = 0; i < v.dims; ++i) v.extent[i] = dims[i].first, v.stride[i] = dims[i].second;
    return v;
  }

  static View vector_view(const Tensor& t) {
    View v;
    v.data = t.data, v.type = t.type, v.dims = 1;
    v.extent[0] = t.shape[0], v.stride[0] = 1;
    return v;
  }

  void build_views() {
    p_.contract = c_;
    p_.device = q_.device;
    p_.stream = call_.stream;
    p_.variant = kernel_variant(c_, call_);
    p_.q = tensor_view(q_), p_.out_q = tensor_view(out_q_);
    if (k_) p_.k = tensor_view(*k_);
    if (out_k_) p_.out_k = tensor_view(*out_k_);
    if (has_kv_cache(c_)) {
      if (call_.v) p_.v = tensor_view(*call_.v), p_.v_cache = cache_view(*call_.v_cache);
      p_.k_cache = cache_view(*call_.k_cache);
      for (auto [t, v] : {std::pair{&call_.kv_indices, &p_.kv_indices}, std::pair{&call_.kv_indptr, &p_.kv_indptr},
                          std::pair{&call_.batch_indices, &p_.batch_indices},
                          std::pair{&call_.slot_mapping, &p_.slot_mapping}})
        if (*t) *v = index_view(**t);
      if (kv_layout(c_) != KvLayout::Contiguous && on_device_) {
        // Paged, on the device: the caller's int32 places (check_page_table).
        p_.cache_positions = index_view(call_.cache_positions ? *call_.cache_positions : *call_.positions);
      } else if (kv_layout(c_) != KvLayout::Contiguous) {
        // Paged: where each token goes, checked (check_page_table), int32.
        p_.owned_cache_positions = std::move(placement_);
        View& v = p_.cache_positions;
        v.data = p_.owned_cache_positions.data(), v.type = ElementType::Int32, v.dims = 1;
        v.extent[0] = static_cast<int64_t>(p_.owned_cache_positions.size()), v.stride[0] = 1;
      }
    }
    if (call_.saved_q) p_.saved_q = tensor_view(*call_.saved_q);
    if (call_.saved_k) p_.saved_k = tensor_view(*call_.saved_k);
    if (call_.positions) p_.positions = positions_view(*call_.positions);
    if (call_.table) {
      const Tensor& t = *call_.table;
      p_.table.data = t.data, p_.table.type = t.type, p_.table.dims = 2;
      p_.table.extent = {t.shape[1], t.shape[0], 0, 0}, p_.table.stride = {1, t.shape[1], 0, 0};
    }
    if (call_.freqs) p_.freqs = vector_view(*call_.freqs);
    if (call_.cos_sin_cache) {
      // (c, position), only the rows up to the largest position read when
      // that is known (GPU targets stage what the kernel is given).
      const Tensor& t = *call_.cos_sin_cache;
      View& v = p_.cos_sin_cache;
      v.data = t.data, v.type = t.type, v.dims = 2;
      v.extent = {t.shape[1], range_known_ ? std::min(t.shape[0], range_.last + 1) : t.shape[0], 0, 0};
      v.stride = {1, t.strides[0], 0, 0};
    }
    if (call_.d_freqs) p_.d_freqs = vector_view(*call_.d_freqs);
    if (on_device_ && kernel_reads_cu_seqlens()) {
      p_.cu_seqlens = index_view(*call_.cu_seqlens);  // int32 (check_cu_seqlens)
    } else if (traits_.packed() && !on_device_) {
      // The kernels read int32 starts; every start is <= T < 2^31.
      if (call_.cu_seqlens)
        for (int64_t i = 0; i < call_.cu_seqlens->shape[0]; ++i)
          p_.owned_cu_seqlens.push_back(static_cast<int32_t>(id_at(*call_.cu_seqlens, i)));
      else
        p_.owned_cu_seqlens = {0, static_cast<int32_t>(q_.shape[traits_.s])};
      p_.cu_seqlens.data = p_.owned_cu_seqlens.data(), p_.cu_seqlens.type = ElementType::Int32, p_.cu_seqlens.dims = 1;
      p_.cu_seqlens.extent[0] = static_cast<int64_t>(p_.owned_cu_seqlens.size()), p_.cu_seqlens.stride[0] = 1;
    }
    p_.offset = call_.offset;
    p_.seq_len_known = call_.seq_len || range_known_;
    p_.seq_len = call_.seq_len.value_or(range_known_ ? range_.last + 1 : 1);
    p_.k_scale = call_.k_scale.value_or(1.0f), p_.v_scale = call_.v_scale.value_or(1.0f);
  }

  void check_memory_of_views() {
    const bool rope = is_rope(c_);
    Arguments args;
    auto add = [&](const char* name, const View& v, bool output, bool tensor, const View* own_input = nullptr) {
      if (v.defined()) args.push_back({name, &v, output, tensor, own_input});
    };
    add(rope ? "q" : "x", p_.q, false, true);
    add(rope ? "out_q" : "out", p_.out_q, true, true, &p_.q);
    add("k", p_.k, false, true);
    add("out_k", p_.out_k, true, true, &p_.k);
    add("saved_q", p_.saved_q, false, true);
    add("saved_k", p_.saved_k, false, true);
    add("positions", p_.positions, false, false);
    if (call_.cu_seqlens) add("cu_seqlens", p_.cu_seqlens, false, false);
    add("table", p_.table, false, false);
    add("freqs", p_.freqs, false, false);
    add("cos_sin_cache", p_.cos_sin_cache, false, false);
    add("d_freqs", p_.d_freqs, true, false);
    add("v", p_.v, false, true);
    add("k_cache", p_.k_cache, true, true);
    add("v_cache", p_.v_cache, true, true);
    add("kv_indices", p_.kv_indices, false, false);
    add("kv_indptr", p_.kv_indptr, false, false);
    add("batch_indices", p_.batch_indices, false, false);
    add("slot_mapping", p_.slot_mapping, false, false);
    if (on_device_) add("cache_positions", p_.cache_positions, false, false);  // the caller's (host: owned)
    std::vector<Diagnostic> memory = check_memory(args);
    errors_.insert(errors_.end(), memory.begin(), memory.end());
    // The append runs as one kernel call (call/parts cuts tensors, not caches).
    if (errors_.empty() && has_kv_cache(c_))
      for (const Argument& a : args)
        if (a.tensor && part_span(*a.view, a.view->extent[2], a.view->extent[3]) > kMaxKernelSpan)
          errors_.push_back(
              named_error(a.name, fmt::format("{} spans more than the 2^31-1 elements one kernel call can "
                                              "address; a KV-cache append runs as one call: pass fewer tokens",
                                              a.name)));
    // Parts' dL/d(inv_freq) are summed on the host (call/parts.h), which a
    // device call cannot do without reading device memory.
    if (errors_.empty() && on_device_ && p_.d_freqs.defined() && plan_parts(p_).size() > 1)
      errors_.push_back(named_error("d_freqs",
                                    "this device call is cut into several kernel calls (a tensor spans more than "
                                    "the 2^31-1 elements one kernel argument addresses), whose dL/d(inv_freq) "
                                    "would be summed on the host: pass fewer tokens per call"));
    // Writing a pair elsewhere than it was read would overwrite other pairs' inputs.
    const ropegen_contract kc = kernel_contract(c_, p_.variant);
    if (errors_.empty() && rope && kc.output_pairing != kc.pairing && !p_.q.empty() &&
        (p_.q.data == p_.out_q.data || (p_.k.defined() && !p_.k.empty() && p_.k.data == p_.out_k.data)))
      errors_.push_back(named_error("out_q",
                                    "this spec reads pairs with one pairing and writes them with another "
                                    "(output_pairing): it cannot run in place; pass out_q (and out_k)"));
  }

  const ropegen_contract& c_;
  const Call& call_;
  const LayoutTraits& traits_;
  std::vector<int32_t> placement_;  // paged KV caches: each token's cache position
  Tensor q_, out_q_;
  std::optional<Tensor> k_, out_k_;
  Shape tokens_;
  PositionRange range_;
  bool on_device_ = false;    // every tensor on one CUDA or Vulkan device (check_devices)
  bool range_known_ = false;  // range_ holds the positions the call reads (check_position_range)
  std::vector<Diagnostic> errors_;
  PreparedCall p_;
};

}  // namespace

bool View::empty() const {
  for (int i = 0; i < dims; ++i)
    if (extent[i] == 0) return true;
  return false;
}

const char* input_name(const ropegen_contract& c) { return is_rope(c) ? "q" : "x"; }
const char* output_name(const ropegen_contract& c) { return is_rope(c) ? "out_q" : "out"; }

Result<PreparedCall> prepare_call(const ropegen_contract& contract, const Call& call) {
  return Preparer(contract, call).run();
}

Result<PreparedCall> prepare_call(const RopeSpec& spec, const Call& call) {
  return prepare_call(call_contract(spec), call);
}

}  // namespace ropegen::call
