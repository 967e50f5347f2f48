#include "call/memory.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace ropegen::call {
namespace {

// Lowest and highest byte a tensor's elements occupy (inclusive).
struct ByteRange {
  uintptr_t lo, hi;
};

// nullopt: no elements; *overflow when a product or the address overflows.
std::optional<ByteRange> byte_range(const View& v, bool* overflow) {
  if (v.empty()) return std::nullopt;
  const int64_t bytes = element_bytes(v.type);
  int64_t lo = 0, hi = bytes - 1;
  for (int i = 0; i < v.dims; ++i) {
    int64_t far = 0;
    if (v.extent[i] <= 1) continue;
    if (__builtin_mul_overflow(v.extent[i] - 1, v.stride[i], &far) || __builtin_mul_overflow(far, bytes, &far) ||
        __builtin_add_overflow(far < 0 ? lo : hi, far, far < 0 ? &lo : &hi))
      return *overflow = true, std::nullopt;
  }
  const auto base = reinterpret_cast<uintptr_t>(v.data);
  const uintptr_t below = 0 - static_cast<uintptr_t>(lo);  // lo <= 0
  if (below > base || static_cast<uintptr_t>(hi) > UINTPTR_MAX - base) return *overflow = true, std::nullopt;
  return ByteRange{base - below, base + static_cast<uintptr_t>(hi)};
}

// The same elements in the same places: an in-place call.
bool same_view(const View& a, const View& b) {
  if (a.data != b.data || a.type != b.type || a.extent != b.extent) return false;
  for (int i = 0; i < a.dims; ++i)
    if (a.extent[i] > 1 && a.stride[i] != b.stride[i]) return false;
  return true;
}

// Whether two elements of a tensor may share memory: they cannot when,
// dims ordered by stride, each stride steps past everything the smaller
// ones span.
bool overlaps_itself(const View& t) {
  FixedVector<std::pair<int64_t, int64_t>, 4> dims;  // (extent, |stride|), by stride: an insertion sort of <= 4
  for (int i = 0; i < t.dims; ++i) {
    if (t.extent[i] <= 1) continue;
    dims.push_back({t.extent[i], t.stride[i] < 0 ? -t.stride[i] : t.stride[i]});
    for (size_t j = dims.size() - 1; j > 0 && dims[j - 1].second > dims[j].second; --j) std::swap(dims[j - 1], dims[j]);
  }
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
bool side_by_side(const View& a, const View& b) {
  const int64_t bytes = element_bytes(a.type);
  int64_t delta = 0;  // b's first element, in a's elements
  if (a.type != b.type || a.dims != b.dims ||
      __builtin_sub_overflow(static_cast<int64_t>(reinterpret_cast<uintptr_t>(b.data)),
                             static_cast<int64_t>(reinterpret_cast<uintptr_t>(a.data)), &delta) ||
      delta % bytes != 0)
    return false;
  delta /= bytes;
  for (int k = 0; k < a.dims; ++k) {
    const int64_t stride = a.stride[k];
    if (stride == 0 || b.stride[k] != stride || delta % stride != 0) continue;
    const int64_t m = delta / stride;  // b starts m steps along k after a
    if (m < a.extent[k] && m + b.extent[k] > 0) continue;  // same indices along k
    View whole = a;
    bool same_strides = true;
    for (int i = 0; i < a.dims; ++i) {
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

bool intersect(const ByteRange& a, const ByteRange& b) { return a.lo <= b.hi && b.lo <= a.hi; }

}  // namespace

int64_t part_span(const View& t, int64_t ns, int64_t nb) {
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

std::vector<Diagnostic> check_memory(const Arguments& args) {
  std::vector<Diagnostic> errors;
  FixedVector<std::optional<ByteRange>, Arguments::capacity> ranges;
  for (const Argument& a : args) {
    bool overflow = false;
    ranges.push_back(byte_range(*a.view, &overflow));
    if (overflow)
      errors.push_back(named_error(a.name, fmt::format("{}'s strides reach past the 64-bit address space", a.name)));
  }
  if (!errors.empty()) return errors;
  for (size_t i = 0; i < args.size(); ++i) {
    const Argument& a = args[i];
    const View& t = *a.view;
    if (!ranges[i]) continue;
    // The kernels read a row (the head dim) with stride 1; ids take any strides.
    if (a.tensor && t.extent[0] > 1 && t.stride[0] != 1) {
      errors.push_back(named_error(
          a.name, fmt::format("the last dim of {} must be contiguous (stride 1, not {})", a.name, t.stride[0])));
      continue;
    }
    if (a.tensor && part_span(t, 1, 1) > kMaxKernelSpan)
      errors.push_back(
          named_error(a.name, fmt::format("one token of {} ({} heads, {} elements apart) spans more than the "
                                          "2^31-1 elements a kernel call can address; pass heads closer together",
                                          a.name, t.extent[1], t.stride[1])));
    else if (a.output && overlaps_itself(t))
      errors.push_back(
          named_error(a.name, fmt::format("{}'s elements overlap each other (a zero or too small stride): an "
                                          "output needs its own memory for every element",
                                          a.name)));
  }
  for (size_t i = 0; i < args.size(); ++i)
    for (size_t j = 0; j < args.size(); ++j) {
      const Argument &out = args[i], &other = args[j];
      // Each output against every input, and each pair of outputs once.
      if (i == j || !out.output || (other.output && j < i) || !ranges[i] || !ranges[j]) continue;
      if (!intersect(*ranges[i], *ranges[j])) continue;
      if (out.own_input && out.own_input == other.view && same_view(*out.view, *other.view)) continue;  // in place
      if (out.tensor && other.tensor && side_by_side(*out.view, *other.view)) continue;
      errors.push_back(
          named_error(out.name, fmt::format("{} overlaps {} in memory: an output may only be exactly its own "
                                            "input (in place: same data, shape and strides) and must share "
                                            "no memory with any other tensor of the call",
                                            out.name, other.name)));
    }
  return errors;
}

}  // namespace ropegen::call
