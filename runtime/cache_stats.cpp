#include "cache_stats.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

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
  visit("compile_seconds", c.compile_seconds);
  visit("disk_load_seconds", c.disk_load_seconds);
}

std::string stats_path(const DiskCache& cache) { return cache.dir() + "/stats"; }

}  // namespace

CacheCounters read_stats(const DiskCache& cache) {
  CacheCounters c;
  std::ifstream in(stats_path(cache));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    double value = 0;
    if (!(fields >> name >> value) || value < 0) continue;
    for_each_counter(c, [&](const char* n, auto& field) {
      if (name == n) field = static_cast<std::decay_t<decltype(field)>>(value);
    });
  }
  return c;
}

std::optional<Diagnostic> add_to_stats(const DiskCache& cache, const CacheCounters& delta) {
  Result<FileLock> held = cache.lock("stats");
  if (!held) return held.errors().front();
  CacheCounters total = read_stats(cache);
  total += delta;
  std::string text;
  for_each_counter(total, [&](const char* name, auto value) { text += fmt::format("{} {}\n", name, value); });
  const std::string path = stats_path(cache), tmp = path + ".tmp";  // only ever written under the lock
  std::ofstream(tmp, std::ios::trunc) << text;
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Diagnostic{{path, -1, -1}, fmt::format("cannot update {}", path), {}};
  return std::nullopt;
}

}  // namespace ropegen::runtime
