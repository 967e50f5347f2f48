#include "call_parts.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "runtime/fork_guard.h"

namespace ropegen::runtime {
namespace {

Diagnostic error(const std::string& what, std::string message) { return Diagnostic{{what, -1, -1}, std::move(message), {}}; }

// Lowest and highest byte a tensor's elements occupy (inclusive).
struct ByteRange {
  uintptr_t lo, hi;
};

// One argument of the call as the user names it, with its memory.
struct Argument {
  std::string name;
  bool output = false;
  const TensorView* view = nullptr;    // the tensors (nullptr: a small Halide buffer)
  const TensorView* own_input = nullptr;  // an output's input: it may be exactly that (in place)
  std::optional<ByteRange> bytes;      // nullopt: no elements
};

using Dims = std::vector<std::pair<int64_t, int64_t>>;  // (extent, stride in elements)

// The byte range of elements laid out by `dims` from `data`, or nullopt
// when a product or the address overflows.
std::optional<ByteRange> byte_range(const void* data, int64_t element_bytes, const Dims& dims, bool* overflow) {
  int64_t lo = 0, hi = element_bytes - 1;
  for (auto [extent, stride] : dims) {
    int64_t far = 0;
    if (extent <= 1) continue;
    if (__builtin_mul_overflow(extent - 1, stride, &far) || __builtin_mul_overflow(far, element_bytes, &far) ||
        __builtin_add_overflow(far < 0 ? lo : hi, far, far < 0 ? &lo : &hi))
      return *overflow = true, std::nullopt;
  }
  const auto base = reinterpret_cast<uintptr_t>(data);
  const uintptr_t below = 0 - static_cast<uintptr_t>(lo);  // lo <= 0
  if (below > base || static_cast<uintptr_t>(hi) > UINTPTR_MAX - base) return *overflow = true, std::nullopt;
  return ByteRange{base - below, base + static_cast<uintptr_t>(hi)};
}

Dims dims_of(const TensorView& t) {
  Dims d;
  for (int i = 0; i < 4; ++i) d.push_back({t.extent[i], t.stride[i]});
  return d;
}

Dims dims_of(const Halide::Buffer<>& b) {
  Dims d;
  for (int i = 0; i < b.dimensions(); ++i) d.push_back({b.dim(i).extent(), b.dim(i).stride()});
  return d;
}

bool is_empty(const Dims& dims) {
  return std::any_of(dims.begin(), dims.end(), [](auto d) { return d.first == 0; });
}

// The same elements in the same places: an in-place call.
bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.type != b.type || a.extent != b.extent) return false;
  for (int i = 0; i < 4; ++i)
    if (a.extent[i] > 1 && a.stride[i] != b.stride[i]) return false;
  return true;
}

// Whether two elements of a tensor share memory: it is sure not to when,
// dims ordered by stride, each stride steps past everything the smaller
// ones span.
bool overlaps_itself(const TensorView& t) {
  Dims dims;
  for (auto [extent, stride] : dims_of(t))
    if (extent > 1) dims.push_back({extent, stride < 0 ? -stride : stride});
  std::sort(dims.begin(), dims.end(), [](auto a, auto b) { return a.second < b.second; });
  int64_t spanned = 1;  // elements from the first to one past the last, of the dims so far
  for (auto [extent, stride] : dims) {
    int64_t far = 0;
    if (stride < spanned || __builtin_mul_overflow(extent - 1, stride, &far) || __builtin_add_overflow(spanned, far, &spanned))
      return true;  // (or too large to tell: taken as overlapping)
  }
  return false;
}

// Two views side by side in one larger tensor whose elements do not
// overlap, along one dim (fused qkv's q and k heads): their byte ranges
// intersect but they share no element.
bool side_by_side(const TensorView& a, const TensorView& b) {
  const int64_t bytes = a.type.bytes();
  int64_t delta = 0;  // b's first element, in a's elements
  if (a.type != b.type ||
      __builtin_sub_overflow(static_cast<int64_t>(reinterpret_cast<uintptr_t>(b.data)),
                             static_cast<int64_t>(reinterpret_cast<uintptr_t>(a.data)), &delta) ||
      delta % bytes != 0)
    return false;
  delta /= bytes;
  for (int k = 0; k < 4; ++k) {
    const int64_t stride = a.stride[k];
    if (stride == 0 || b.stride[k] != stride || delta % stride != 0) continue;
    const int64_t m = delta / stride;  // b starts m steps along k after a
    if (m < a.extent[k] && m + b.extent[k] > 0) continue;  // same indices along k
    TensorView whole = a;
    bool same_strides = true;
    for (int i = 0; i < 4; ++i) {
      if (i == k) continue;
      same_strides &= a.extent[i] <= 1 || b.extent[i] <= 1 || a.stride[i] == b.stride[i];
      if (a.extent[i] <= 1) whole.stride[i] = b.stride[i];
      whole.extent[i] = std::max(a.extent[i], b.extent[i]);
    }
    whole.data = m < 0 ? b.data : a.data;
    whole.extent[k] = std::max(a.extent[k], m + b.extent[k]) - std::min<int64_t>(0, m);
    if (same_strides && !overlaps_itself(whole)) return true;
  }
  return false;
}

// Elements one kernel argument addresses for a part of ns tokens of nb
// batches: at most the sum of each dim's extent times stride (which bounds
// every offset) or the element count, whichever is larger (INT64_MAX when
// it overflows).
int64_t part_span(const TensorView& t, int64_t ns, int64_t nb) {
  const int64_t extents[4] = {t.extent[0], t.extent[1], ns, nb};
  int64_t span = 0, count = 1;
  for (int i = 0; i < 4; ++i) {
    int64_t term = 0;
    const int64_t stride = extents[i] > 1 ? std::max<int64_t>(1, t.stride[i] < 0 ? -t.stride[i] : t.stride[i]) : 1;
    if (__builtin_mul_overflow(extents[i], stride, &term) || __builtin_add_overflow(span, term, &span) ||
        __builtin_mul_overflow(count, extents[i], &count))
      return INT64_MAX;
  }
  return std::max(span, count);
}

std::vector<Argument> arguments(const RopeSpec& spec, const RopeCall& c, std::vector<Diagnostic>& errors) {
  std::vector<Argument> present;
  auto add = [&](std::string name, bool output, const void* data, Halide::Type type, const Dims& dims,
                 const TensorView* view, const TensorView* own_input) {
    Argument a;
    a.name = std::move(name), a.output = output, a.view = view, a.own_input = own_input;
    bool overflow = false;
    for (auto [extent, stride] : dims)
      if (extent < 0 || extent > INT32_MAX)
        errors.push_back(error(a.name, fmt::format("{} has a dim of {} elements: every dim must be in 0..2^31-1", a.name, extent)));
    if (!is_empty(dims)) a.bytes = byte_range(data, type.bytes(), dims, &overflow);
    if (overflow) errors.push_back(error(a.name, fmt::format("{}'s strides reach past the 64-bit address space", a.name)));
    present.push_back(a);
  };
  auto add_view = [&](std::string name, const TensorView& t, bool output, const TensorView* own_input = nullptr) {
    if (t.defined()) add(std::move(name), output, t.data, t.type, dims_of(t), &t, own_input);
  };
  auto add_buffer = [&](std::string name, const Halide::Buffer<>& b, bool output) {
    if (b.defined()) add(std::move(name), output, b.data(), b.type(), dims_of(b), nullptr, nullptr);
  };
  const bool rope = spec.encoding == Encoding::Rope;
  add_view(rope ? "q" : "x", c.q, false);
  add_view(rope ? "out_q" : "out", c.out_q, true, &c.q);
  add_view("k", c.k, false);
  add_view("out_k", c.out_k, true, &c.k);
  add_view("saved_q", c.saved_q, false);
  add_view("saved_k", c.saved_k, false);
  add_buffer("positions", c.positions, false);
  add_buffer("cu_seqlens", c.cu_seqlens, false);
  add_buffer("table", c.table, false);
  add_buffer("freqs", c.freqs, false);
  add_buffer("d_freqs", c.d_freqs, true);
  return present;
}

bool intersect(const ByteRange& a, const ByteRange& b) { return a.lo <= b.hi && b.lo <= a.hi; }

void check_memory(const std::vector<Argument>& args, std::vector<Diagnostic>& errors) {
  for (const Argument& out : args) {
    if (!out.output || !out.bytes) continue;
    if (out.view && out.view->extent[0] > 1 && out.view->stride[0] != 1) continue;  // said below, per tensor
    if (out.view && overlaps_itself(*out.view))
      errors.push_back(error(out.name, fmt::format("{}'s elements overlap each other (a zero or too small stride): an "
                                                   "output needs its own memory for every element",
                                                   out.name)));
  }
  for (size_t i = 0; i < args.size(); ++i)
    for (size_t j = 0; j < args.size(); ++j) {
      const Argument &out = args[i], &other = args[j];
      // Each output against every input, and each pair of outputs once.
      if (i == j || !out.output || (other.output && j < i) || !out.bytes || !other.bytes) continue;
      if (!intersect(*out.bytes, *other.bytes)) continue;
      if (out.own_input && out.own_input == other.view && same_view(*out.view, *other.view)) continue;  // in place
      if (out.view && other.view && side_by_side(*out.view, *other.view)) continue;
      errors.push_back(error(out.name, fmt::format("{} overlaps {} in memory: an output may only be exactly its own "
                                                   "input (in place: same data, shape and strides) and must share "
                                                   "no memory with any other tensor of the call",
                                                   out.name, other.name)));
    }
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

std::vector<const TensorView*> views(const RopeCall& c) {
  std::vector<const TensorView*> out;
  for (const TensorView* t : {&c.q, &c.out_q, &c.k, &c.out_k, &c.saved_q, &c.saved_k})
    if (t->defined()) out.push_back(t);
  return out;
}

bool is_empty(const RopeCall& c) {
  const std::vector<const TensorView*> all = views(c);
  return std::all_of(all.begin(), all.end(), [](const TensorView* t) { return t->empty(); });
}

Halide::Buffer<> part_buffer(const TensorView& t, const CallPart& p) {
  if (!t.defined()) return {};
  const int64_t mins[4] = {0, 0, p.s0, p.b0}, extents[4] = {t.extent[0], t.extent[1], p.ns, p.nb};
  halide_dimension_t dims[4];
  int64_t offset = 0;  // inside the checked byte range
  for (int i = 0; i < 4; ++i) {
    offset += mins[i] * t.stride[i];
    // A lone element's stride, or an empty tensor's, is never used (the
    // kernels want 1 on d); the others fit (plan_parts).
    const int64_t stride = extents[i] > 1 && !t.empty() ? t.stride[i] : i == 0 ? 1 : 0;
    dims[i] = halide_dimension_t(static_cast<int32_t>(mins[i]), static_cast<int32_t>(extents[i]), static_cast<int32_t>(stride));
  }
  return Halide::Buffer<>(t.type, static_cast<uint8_t*>(t.data) + offset * t.type.bytes(), 4, dims);
}

// Run-time frequencies obey the bound every spec's frequencies do
// (kMaxInvFreq: the kernels count quarter turns of position * inv_freq in an
// int64), and NaN or inf would turn every output into NaN without a word.
void check_runtime_freqs(const RopeCall& call, std::vector<Diagnostic>& errors) {
  if (!call.freqs.defined()) return;
  const Halide::Buffer<float> f(call.freqs);
  for (int i = f.dim(0).min(); i <= f.dim(0).max(); ++i)
    if (!(std::fabs(f(i)) <= kMaxInvFreq)) {
      errors.push_back(error("freqs", fmt::format("freqs[{}] is {}: run-time frequencies must be finite and at most {} "
                                                  "in magnitude (radians per position)",
                                                  i, f(i), kMaxInvFreq)));
      return;
    }
}

}  // namespace

std::vector<Diagnostic> check_tensors(const RopeSpec& spec, const RopeCall& call) {
  std::vector<Diagnostic> errors;
  const std::vector<Argument> args = arguments(spec, call, errors);
  if (!errors.empty()) return errors;
  for (const Argument& a : args) {
    if (!a.view || !a.bytes) continue;
    const TensorView& t = *a.view;
    if (t.extent[0] > 1 && t.stride[0] != 1)
      errors.push_back(error(a.name, fmt::format("the last dim of {} must be contiguous (stride 1, not {})", a.name, t.stride[0])));
    else if (part_span(t, 1, 1) > kMaxKernelSpan)
      errors.push_back(error(a.name, fmt::format("one token of {} ({} heads, {} elements apart) spans more than the "
                                                 "2^31-1 elements a kernel call can address; pass heads closer together",
                                                 a.name, t.extent[1], t.stride[1])));
  }
  check_memory(args, errors);
  check_runtime_freqs(call, errors);
  return errors;
}

std::vector<CallPart> plan_parts(const RopeCall& call) {
  const std::vector<const TensorView*> all = views(call);
  auto fits = [&](int64_t ns, int64_t nb) {
    return std::all_of(all.begin(), all.end(), [&](const TensorView* t) { return part_span(*t, ns, nb) <= kMaxKernelSpan; });
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

BufferCall part_of(const RopeCall& c, const CallPart& p) {
  BufferCall b;
  b.q = part_buffer(c.q, p), b.out_q = part_buffer(c.out_q, p);
  b.k = part_buffer(c.k, p), b.out_k = part_buffer(c.out_k, p);
  b.saved_q = part_buffer(c.saved_q, p), b.saved_k = part_buffer(c.saved_k, p);
  if (c.positions.defined()) {
    const int s = c.positions.dimensions() - 2;  // (s, b) or (axis, s, b)
    b.positions = c.positions.cropped(s, static_cast<int>(p.s0), static_cast<int>(p.ns))
                      .cropped(s + 1, static_cast<int>(p.b0), static_cast<int>(p.nb));
  }
  b.cu_seqlens = c.cu_seqlens, b.table = c.table, b.freqs = c.freqs, b.d_freqs = c.d_freqs;
  b.offset = c.offset, b.seq_len = c.seq_len;
  return b;
}

void run_in_parts(const RopeSpec& spec, const RopeCall& call, const std::function<void(const BufferCall&)>& run_part) {
  if (std::vector<Diagnostic> errors = check_tensors(spec, call); !errors.empty())
    throw std::invalid_argument(format(errors));
  const NotDuringFork running;  // a fork() waits for the run (fork_guard.h)
  Halide::Buffer<float> d_freqs;
  if (call.d_freqs.defined()) d_freqs = Halide::Buffer<float>(call.d_freqs), d_freqs.fill(0.0f);
  if (is_empty(call)) return;
  const std::vector<CallPart> parts = plan_parts(call);
  if (parts.size() == 1) return run_part(part_of(call, parts[0]));
  for (const CallPart& p : parts) {
    BufferCall part = part_of(call, p);
    if (d_freqs.defined()) part.d_freqs = Halide::Buffer<float>(d_freqs.dim(0).extent());
    run_part(part);
    if (d_freqs.defined()) {
      const Halide::Buffer<float> sum(part.d_freqs);
      d_freqs.for_each_element([&](int r) { d_freqs(r) += sum(r); });
    }
  }
}

}  // namespace ropegen::runtime
