#include "host_memory.h"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ropegen::runtime {
namespace {

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t bytes = 0;
  if (pages <= 0 || page <= 0 || __builtin_mul_overflow(static_cast<uint64_t>(pages), static_cast<uint64_t>(page), &bytes))
    return UINT64_MAX;  // unknown: no limit beyond overflow
  return bytes;
}

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

}  // namespace

Result<int64_t> element_count(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return named_error(what, fmt::format("{} elements overflow int64", fmt::join(dims, " x ")));
  return n;
}

Result<uint64_t> host_bytes_for(const std::vector<std::pair<int64_t, int64_t>>& parts, const std::string& what) {
  uint64_t total = 0;
  for (const auto& [count, item_bytes] : parts) {
    uint64_t bytes = 0;
    if (count < 0 || item_bytes < 0 ||
        __builtin_mul_overflow(static_cast<uint64_t>(count), static_cast<uint64_t>(item_bytes), &bytes) ||
        __builtin_add_overflow(total, bytes, &total))
      return named_error(what, "needs more than 2^64 bytes of memory");
  }
  const uint64_t available = physical_memory_bytes();
  if (total > available)
    return named_error(what, fmt::format("needs {} bytes ({:.1f} GiB) of memory; this machine has {:.1f} GiB", total,
                                         gib(total), gib(available)));
  return total;
}

}  // namespace ropegen::runtime
