// A vector of at most N elements kept inline. Every call builds a few small
// lists (shapes, the arguments checked for overlaps, a tensor's dims by
// stride); with a std::vector each was a heap allocation per call, a
// measurable share of a one-token decode. Going past N is a bug in
// rope-gen, never a user error: it aborts.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace ropegen::call {

template <typename T, size_t N>
class FixedVector {
 public:
  static constexpr size_t capacity = N;

  FixedVector() = default;
  FixedVector(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }

  void push_back(const T& t) {
    if (size_ == N) {
      std::fputs("rope-gen: internal error: a FixedVector is full (please report)\n", stderr);
      std::abort();
    }
    items_[size_++] = t;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T& back() { return items_[size_ - 1]; }
  T* data() { return items_.data(); }
  const T* data() const { return items_.data(); }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + size_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + size_; }

  friend bool operator==(const FixedVector& a, const FixedVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const FixedVector& a, const FixedVector& b) { return !(a == b); }

 private:
  std::array<T, N> items_;  // default-initialised: only the first size_ are ever read
  size_t size_ = 0;
};

}  // namespace ropegen::call
