// Every Nth case of a sweep, N = ROPEGEN_TEST_SWEEP_STRIDE (unset: every
// case). The sanitizer pass (`make test-sanitize`) sets it: there every case
// of a sweep runs the same instrumented rope-gen code on other specs and
// sizes, the kernels Halide generates are not instrumented, and the release
// pass (`make test`) checks each case against the reference. The subset
// starts at a different case per sweep size so that sweeps of one length do
// not all keep the same positions.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ropegen::test {

inline int sweep_stride() {
  const char* text = std::getenv("ROPEGEN_TEST_SWEEP_STRIDE");
  const int n = text ? std::atoi(text) : 1;
  return n > 1 ? n : 1;
}

// At least how many of `all` cases sweep_subset keeps (for "N cases checked").
inline int sweep_count(int all) { return all / sweep_stride(); }

template <typename T>
std::vector<T> sweep_subset(const std::vector<T>& all) {
  const size_t stride = static_cast<size_t>(sweep_stride());
  if (stride == 1) return all;
  std::vector<T> kept;
  for (size_t i = all.empty() ? 0 : all.size() % stride % all.size(); i < all.size(); i += stride)
    kept.push_back(all[i]);
  std::printf("[ SUBSET   ] %zu of %zu cases (ROPEGEN_TEST_SWEEP_STRIDE=%zu)\n", kept.size(), all.size(), stride);
  return kept;
}

}  // namespace ropegen::test
