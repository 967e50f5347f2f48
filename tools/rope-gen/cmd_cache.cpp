// rope-gen cache list|clear|stats [--json]: the kernel cache that apply and
// bench go through (ropegen::Runtime), in $ROPEGEN_CACHE_DIR (default
// $XDG_CACHE_HOME/rope-gen or ~/.cache/rope-gen).
#include <ctime>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_error.h"
#include "commands.h"
#include "ropegen/runtime.h"
#include "runtime/cache_stats.h"
#include "runtime/disk_cache.h"

namespace ropegen::cli {
namespace {

using nlohmann::ordered_json;

// The configured cache, or nullopt when its directory does not exist yet
// (listing must not create it). A directory that is not a trusted rope-gen
// cache is exit 2 with why (clear deletes nothing there).
std::optional<runtime::DiskCache> open_cache(std::string* dir) {
  const RuntimeOptions options = unwrap(RuntimeOptions::from_environment());
  *dir = options.cache_dir;
  if (dir->empty()) fail("no kernel cache directory: set ROPEGEN_CACHE_DIR (or HOME)");
  std::error_code ec;
  if (!std::filesystem::exists(*dir, ec)) return std::nullopt;
  return unwrap(runtime::DiskCache::open(*dir, options.max_bytes));
}

std::string local_time(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

void run_list(bool json) {
  std::string dir;
  const auto cache = open_cache(&dir);
  const std::vector<runtime::CacheEntryInfo> entries = cache ? cache->entries() : std::vector<runtime::CacheEntryInfo>{};
  ordered_json list = ordered_json::array();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {  // most recently used first
    const runtime::KeyFields f = runtime::key_fields(it->tag.value_or(""));
    list.push_back({{"key", it->key},
                    {"name", f.spec_name},
                    {"variant", f.variant},
                    {"target", f.target},
                    {"spec_hash", f.spec_hash},
                    {"bytes", it->bytes},
                    {"last_used", local_time(it->last_used)},
                    {"readable", it->tag.has_value()}});
  }
  if (json) {
    std::cout << list.dump() << "\n";
    return;
  }
  std::cout << fmt::format("{:<16}  {:<20} {:<7} {:>9}  {:<19}  {}\n", "key", "name", "variant", "bytes", "last used", "target");
  for (const auto& e : list)
    std::cout << fmt::format("{:<16}  {:<20} {:<7} {:>9}  {:<19}  {}\n", e["key"].get<std::string>(),
                             e["readable"].get<bool>() ? e["name"].get<std::string>() : "(damaged)",
                             e["variant"].get<std::string>(), e["bytes"].get<uint64_t>(),
                             e["last_used"].get<std::string>(), e["target"].get<std::string>());
  std::cout << fmt::format("{} entries in {}\n", list.size(), dir);
}

void run_clear() {
  std::string dir;
  const auto cache = open_cache(&dir);
  const runtime::DiskCache::Cleared c = cache ? cache->clear() : runtime::DiskCache::Cleared{};
  std::cout << fmt::format("removed {} entries ({:.1f} MB) from {}\n", c.entries, c.bytes / 1e6, dir);
}

void run_stats(bool json) {
  std::string dir;
  const auto cache = open_cache(&dir);
  const CacheCounters c = cache ? runtime::read_stats(*cache) : CacheCounters{};
  uint64_t bytes = 0;
  size_t count = 0;
  if (cache)
    for (const auto& e : cache->entries()) bytes += e.bytes, ++count;
  const uint64_t cap = unwrap(RuntimeOptions::from_environment()).max_bytes;
  auto mean_ms = [](double seconds, uint64_t n) { return n ? seconds / n * 1e3 : 0.0; };
  ordered_json j;
  j["dir"] = dir;
  j["entries"] = count;
  j["bytes"] = bytes;
  j["max_bytes"] = cap;
  j["memory"] = {{"hits", c.memory_hits}, {"misses", c.memory_misses}};
  j["disk"] = {{"hits", c.disk_hits}, {"misses", c.disk_misses}, {"mean_load_ms", mean_ms(c.disk_load_seconds, c.disk_hits)}};
  j["compile"] = {{"count", c.compiles}, {"mean_ms", mean_ms(c.compile_seconds, c.compiles)}};
  j["evicted"] = {{"lru", c.lru_evicted}, {"damaged", c.damaged_evicted}};
  j["jit_fallbacks"] = c.jit_fallbacks;
  j["refused"] = c.refused;
  j["last_fallback"] = c.last_fallback;
  if (json) {
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << fmt::format("kernel cache {}: {} entries, {:.1f} of {:.1f} MB\n", dir, count, bytes / 1e6, cap / 1e6)
            << fmt::format("  memory   {} hits, {} misses\n", c.memory_hits, c.memory_misses)
            << fmt::format("  disk     {} hits, {} misses, {:.2f} ms per load\n", c.disk_hits, c.disk_misses,
                           mean_ms(c.disk_load_seconds, c.disk_hits))
            << fmt::format("  compile  {} kernels, {:.0f} ms each\n", c.compiles, mean_ms(c.compile_seconds, c.compiles))
            << fmt::format("  evicted  {} least recently used, {} damaged\n", c.lru_evicted, c.damaged_evicted)
            << fmt::format("  JIT in memory only (cache unusable or target not loadable): {}\n", c.jit_fallbacks)
            << fmt::format("  refused  {} (a file or directory others could write, a lock held too long)\n", c.refused);
  if (!c.last_fallback.empty()) std::cout << fmt::format("  last JIT fallback: {}\n", c.last_fallback);
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("cache",
                                 "The kernel cache used by apply and bench: $ROPEGEN_CACHE_DIR (default\n"
                                 "$XDG_CACHE_HOME/rope-gen or ~/.cache/rope-gen), capped at $ROPEGEN_CACHE_MAX_BYTES (1G)");
  cmd->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  auto* list = cmd->add_subcommand("list", "One line per cached kernel, most recently used first");
  list->add_flag("--json", *json, "a JSON array instead of a table");
  list->callback([json] { run_list(*json); });
  cmd->add_subcommand("clear", "Remove every cached kernel and the counters (only files of the cache's own format)")
      ->callback(run_clear);
  auto* stats = cmd->add_subcommand("stats", "Hits and misses per level (memory, disk, compile), over every process");
  stats->add_flag("--json", *json, "one JSON object");
  stats->callback([json] { run_stats(*json); });
}

}  // namespace ropegen::cli
