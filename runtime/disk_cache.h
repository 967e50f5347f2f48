// The disk level of the kernel cache: a directory of entries, one file per
// key, and how processes share it.
//
//   DIR/kernels/<key>.so   entries (cache_entry format); mtime = last use, for LRU
//   DIR/runtime/<key>.o    Halide's runtime per target, sealed the same way, linked into kernels
//   DIR/locks/<name>.lock  flock'ed: key buckets while an entry is built, evict, stats
//   DIR/tmp/               each compile's private work directory
//   DIR/stats              cumulative counters (cache_stats)
//
// Every path is DIR plus a fixed name or a key's hex digits: nothing a spec
// says ever becomes part of a path. Entries appear by rename (whole or not
// at all) and are never modified in place. Code is loaded from DIR, so DIR
// must belong to the user and be writable by nobody else.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ropegen/result.h"
#include "runtime/cache_key.h"

namespace ropegen::runtime {

// An exclusive flock held until destruction (released by the kernel if the
// process dies, so a crashed compile never blocks others).
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {}
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  int fd_;
};

struct CacheEntryInfo {
  std::string key;  // 16 hex digits
  std::string path;
  uint64_t bytes = 0;
  std::chrono::system_clock::time_point last_used;
  std::optional<std::string> tag;  // the key text from the trailer; nullopt if unreadable
};

class DiskCache {
 public:
  // Creates DIR (mode 0700) and its subdirectories as needed; refuses a DIR
  // that another user owns or others can write.
  static Result<DiskCache> open(const std::string& dir, uint64_t max_bytes);

  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  std::string entry_path(const CacheKey& key) const;
  std::string runtime_object_path(const CacheKey& key) const;

  // Held while building or evicting the key's entry. Keys share 256 lock
  // files (by their first two hex digits), so lock files never need deleting.
  Result<FileLock> lock_key(const CacheKey& key) const;
  // Other locks, always taken after a key's lock, never before:
  // "runtime-xx" (a runtime object), "evict", "stats".
  Result<FileLock> lock(const std::string& name) const;

  // A fresh private directory under tmp/ (on the entries' file system, so
  // publish() is a rename).
  Result<std::string> make_work_dir() const;
  // Moves a sealed file into place (entry_path or runtime_object_path),
  // atomically, and makes the rename durable.
  std::optional<Diagnostic> publish(const std::string& sealed_file, const std::string& path) const;
  // Marks an entry used now (LRU order).
  void touch(const CacheKey& key) const;
  void remove(const std::string& path) const;

  std::vector<CacheEntryInfo> entries() const;  // with tags; oldest use first
  // Removes least recently used entries until the total fits max_bytes,
  // never `keep`; also work directories abandoned by crashed processes.
  // Returns how many entries went.
  int evict_to_fit(const std::string& keep) const;

  struct Cleared {
    int entries = 0;
    uint64_t bytes = 0;
  };
  // Removes every entry, runtime object, work directory and the stats file.
  Cleared clear() const;

 private:
  DiskCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::string dir_;
  uint64_t max_bytes_;
};

// $ROPEGEN_CACHE_DIR, else $XDG_CACHE_HOME/rope-gen, else ~/.cache/rope-gen;
// empty if none can be named.
std::string default_cache_dir();

}  // namespace ropegen::runtime
