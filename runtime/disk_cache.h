// The disk level of the kernel cache: a directory of entries, one file per
// key, and how processes share it.
//
//   DIR/CACHEDIR.TAG       marks DIR as a rope-gen cache (cache_marker)
//   DIR/kernels/<key>.so   entries (cache_entry format); mtime = last use, for LRU
//   DIR/runtime/<key>.o    Halide's runtime per target, sealed the same way, linked into kernels
//   DIR/objects/<key>.aot  an AOT build's compiled entry (its objects), sealed the same way (aot_memo)
//   DIR/locks/<name>.lock  flock'ed: key buckets while an entry is built, evict, stats
//   DIR/tmp/build-XXXXXX   each compile's private work directory
//   DIR/stats              cumulative counters (cache_stats)
//
// Every path is DIR plus a fixed name or a key's hex digits: nothing a spec
// says ever becomes part of a path. Entries appear by rename (whole or not
// at all) and are never modified in place. rope-gen adopts only a new or
// empty directory (or one it marked), and removes only files of the names
// above that this user owns. Code is loaded from DIR, so every file used is
// opened through trusted_path (this user's, writable by nobody else, on a
// path nobody else can change).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ropegen/result.h"
#include "runtime/cache_key.h"
#include "runtime/trusted_path.h"
#include "runtime/unique_fd.h"

namespace ropegen::runtime {

// An exclusive flock held until destruction (released by the kernel if the
// process dies, so a crashed compile never blocks others).
class FileLock {
 public:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}

 private:
  UniqueFd fd_;  // closing releases the flock
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
  // Creates DIR (mode 0700) and its subdirectories as needed. Refuses a DIR
  // that is not trusted (trusted_path) or is neither empty nor a rope-gen
  // cache. A lock held by another process is waited for at most `lock_wait`.
  static Result<DiskCache> open(const std::string& dir, uint64_t max_bytes,
                                std::chrono::milliseconds lock_wait = std::chrono::seconds(30));

  const std::string& dir() const { return dir_; }  // canonical (realpath)
  uint64_t max_bytes() const { return max_bytes_; }
  // Names relative to dir(), and where they are.
  static std::string entry_name(const CacheKey& key);
  static std::string runtime_object_name(const CacheKey& key);
  static std::string aot_objects_name(const CacheKey& key);
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // A file of the cache opened for use, checked down from "/" now.
  TrustedOpen open_file(const std::string& name) const;

  // Held while building or evicting the key's entry. Keys share 256 lock
  // files (by their first two hex digits), so lock files never need deleting.
  Result<FileLock> lock_key(const CacheKey& key) const;
  // Other locks, always taken after a key's lock, never before:
  // "runtime-xx" (a runtime object), "evict", "stats". A diagnostic after
  // `wait` if another process holds it (a stopped process must not hang us).
  Result<FileLock> lock(const std::string& name, std::chrono::milliseconds wait) const;

  // A fresh private directory under tmp/ (on the entries' file system, so
  // publish() is a rename): its name, "tmp/build-XXXXXX".
  Result<std::string> make_work_dir() const;
  // Moves a sealed file into place (a name from entry_name or
  // runtime_object_name), atomically, and makes the rename durable. Never
  // over a file that replaceable() refuses.
  std::optional<Diagnostic> publish(const std::string& sealed_file, const std::string& name) const;
  // Whether `name` may be renamed over: absent, or a regular file this user owns.
  bool replaceable(const std::string& name) const;
  // Marks an entry used now (LRU order).
  void touch(const CacheKey& key) const;
  void touch(const std::string& name) const;
  // Removes a file of the cache (a damaged entry, a stale temporary): only
  // if it is a regular file this user owns.
  void remove(const std::string& name) const;

  std::vector<CacheEntryInfo> entries() const;  // with tags; oldest use first
  // Removes least recently used entries (kernels and AOT objects) until the total fits max_bytes,
  // never `keep`; also work directories abandoned by crashed processes.
  // Returns how many entries went.
  int evict_to_fit(const std::string& keep) const;

  struct Cleared {
    int entries = 0;
    uint64_t bytes = 0;
  };
  // Removes every entry, runtime object, AOT object, work directory and the stats file.
  Cleared clear() const;

 private:
  DiskCache(std::string dir, uint64_t max_bytes, std::chrono::milliseconds lock_wait)
      : dir_(std::move(dir)), max_bytes_(max_bytes), lock_wait_(lock_wait) {}
  std::string dir_;
  uint64_t max_bytes_;
  std::chrono::milliseconds lock_wait_;
};

// Why the cache did what it did, one line on stderr, only with ROPEGEN_VERBOSE=1.
void verbose_note(const std::string& message);

// $ROPEGEN_CACHE_DIR, else $XDG_CACHE_HOME/rope-gen, else ~/.cache/rope-gen;
// empty if none can be named.
std::string default_cache_dir();

}  // namespace ropegen::runtime
