#include "cache_stats.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "runtime/fd_io.h"

namespace ropegen::runtime {
namespace {

// Every counter with its name in the file; one table for reading, writing and adding.
template <typename Visit>
void for_each_counter(CacheCounters& c, Visit visit) {
  visit("memory_hits", c.memory_hits);
  visit("memory_misses", c.memory_misses);
  visit("disk_hits", c.disk_hits);
  visit("disk_misses", c.disk_misses);
  visit("compiles", c.compiles);
  visit("damaged_evicted", c.damaged_evicted);
  visit("lru_evicted", c.lru_evicted);
  visit("jit_fallbacks", c.jit_fallbacks);
  visit("refused", c.refused);
  visit("compile_seconds", c.compile_seconds);
  visit("disk_load_seconds", c.disk_load_seconds);
}
// The one text field: the rest of its line.
constexpr const char* kLastFallback = "last_fallback";
// The file is a few hundred bytes; more is not ours to read.
constexpr size_t kMaxStatsBytes = 1 << 16;

constexpr const char* kStatsName = "stats";

}  // namespace

CacheCounters read_stats(const DiskCache& cache) {
  CacheCounters c;
  // Opened like every file of the cache: a FIFO there must not block us.
  const TrustedOpen file = cache.open_file(kStatsName);
  if (file.status != TrustedOpen::Status::Ok || static_cast<size_t>(file.st.st_size) > kMaxStatsBytes) return c;
  std::string text(static_cast<size_t>(file.st.st_size), '\0');
  if (!read_at(file.fd.get(), text.data(), text.size(), 0)) return c;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name == kLastFallback) {
      std::getline(fields >> std::ws, c.last_fallback);
      continue;
    }
    double value = 0;
    if (!(fields >> value) || value < 0) continue;
    for_each_counter(c, [&](const char* n, auto& field) {
      if (name == n) field = static_cast<std::decay_t<decltype(field)>>(value);
    });
  }
  return c;
}

std::optional<Diagnostic> add_to_stats(const DiskCache& cache, const CacheCounters& delta) {
  Result<FileLock> held = cache.lock("stats", std::chrono::seconds(2));  // advisory: never worth a long wait
  if (!held) return held.errors().front();
  CacheCounters total = read_stats(cache);
  total += delta;
  std::string text;
  for_each_counter(total, [&](const char* name, auto value) { text += fmt::format("{} {}\n", name, value); });
  if (!total.last_fallback.empty()) text += fmt::format("{} {}\n", kLastFallback, total.last_fallback);
  const std::string path = cache.path(kStatsName), tmp = path + ".tmp";  // only ever written under the lock
  if (!cache.replaceable(kStatsName))
    return named_error(path, fmt::format("{} is not rope-gen's: left as it is", path));
  cache.remove(std::string(kStatsName) + ".tmp");  // left by a process that died while writing
  if (!write_new_file(tmp, text))
    return named_error(path, fmt::format("cannot update {}: {}", path, std::strerror(errno)));
  if (const auto failure = base::publish_file(tmp, path, {/*only_own_files=*/true, /*sync_dir=*/false}))
    return named_error(path, fmt::format("cannot update {}: {}", path, failure->why));
  return std::nullopt;
}

}  // namespace ropegen::runtime
