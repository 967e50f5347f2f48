#include "disk_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/file_write.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_marker.h"

namespace ropegen::runtime {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A compile takes seconds; a work directory this old was left by a process
// that died.
constexpr auto kAbandoned = std::chrono::hours(1);
// Eviction and the stats file are housekeeping: skipped rather than waited
// for when another process holds them long.
constexpr milliseconds kHousekeepingWait(2000);
constexpr const char* kWorkPrefix = "build-";
// Entries and runtime objects replace only this user's regular files, durably.
constexpr base::ReplaceRules kCacheFiles{/*only_own_files=*/true, /*sync_dir=*/true};

std::string errno_text() { return std::strerror(errno); }

// <16 hex digits><suffix>: the names of entries and runtime objects.
bool is_key_name(const std::string& name, const std::string& suffix) {
  if (name.size() != 16 + suffix.size() || name.compare(16, suffix.size(), suffix) != 0) return false;
  return std::all_of(name.begin(), name.begin() + 16, [](char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

// build-XXXXXX, as make_work_dir names them.
bool is_work_dir_name(const std::string& name) {
  return name.size() == std::strlen(kWorkPrefix) + 6 && name.compare(0, std::strlen(kWorkPrefix), kWorkPrefix) == 0;
}

// A regular file (not a link) this user owns: one rope-gen may remove.
bool removable_file(const std::string& path, struct stat* st) {
  return ::lstat(path.c_str(), st) == 0 && S_ISREG(st->st_mode) && owned_by_me(*st);
}

std::chrono::system_clock::time_point modified(const struct stat& st) {
  using namespace std::chrono;
  return system_clock::time_point(duration_cast<system_clock::duration>(seconds(st.st_mtim.tv_sec) + nanoseconds(st.st_mtim.tv_nsec)));
}

// Files named <key><suffix> in `sub` that rope-gen may remove, with size
// and last use, oldest first.
std::vector<CacheEntryInfo> list_files(const std::string& sub, const std::string& suffix, bool with_tags) {
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(sub, ec)) {
    const std::string name = f.path().filename().string();
    struct stat st;
    if (!is_key_name(name, suffix) || !removable_file(f.path(), &st)) continue;
    CacheEntryInfo e{name.substr(0, 16), f.path().string(), static_cast<uint64_t>(st.st_size), modified(st), {}};
    if (with_tags) e.tag = read_entry_tag(e.path);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  return out;
}

// Work directories (build-XXXXXX, this user's) last changed before `before`.
void remove_work_dirs(const std::string& tmp, fs::file_time_type before) {
  std::error_code ec;
  for (const auto& w : fs::directory_iterator(tmp, ec)) {
    struct stat st;
    if (!is_work_dir_name(w.path().filename().string()) || ::lstat(w.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        !owned_by_me(st) || fs::last_write_time(w.path(), ec) >= before)
      continue;
    fs::remove_all(w.path(), ec);  // does not follow links: only what the compile wrote
  }
}

// Kernels are loaded by descriptor, through /proc/self/fd.
std::optional<Diagnostic> check_proc_fd(const TrustedOpen& dir, const std::string& path) {
  struct stat via_proc;
  const std::string link = fmt::format("/proc/self/fd/{}", dir.fd.get());
  if (::stat(link.c_str(), &via_proc) != 0 || via_proc.st_ino != dir.st.st_ino || via_proc.st_dev != dir.st.st_dev)
    return named_error(path, fmt::format("kernel cache {}: /proc is not mounted; rope-gen loads cached kernels through "
                                         "/proc/self/fd so that the file checked is the file loaded",
                                         path));
  return std::nullopt;
}

}  // namespace

void verbose_note(const std::string& message) {
  if (std::getenv("ROPEGEN_VERBOSE")) std::fprintf(stderr, "rope-gen: kernel cache: %s\n", message.c_str());
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("ROPEGEN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/rope-gen";
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const passwd* pw = getpwuid(geteuid());
    home = pw ? pw->pw_dir : nullptr;
  }
  return home && *home ? std::string(home) + "/.cache/rope-gen" : std::string();
}

Result<DiskCache> DiskCache::open(const std::string& dir, uint64_t max_bytes, milliseconds lock_wait) {
  if (dir.empty()) return named_error("ROPEGEN_CACHE_DIR", "no kernel cache directory: set ROPEGEN_CACHE_DIR or HOME");
  std::error_code ec;
  const fs::path given(dir);
  if (given.has_parent_path()) fs::create_directories(given.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return named_error(dir, fmt::format("cannot create the kernel cache directory {}: {}", dir, errno_text()));
  char* real = ::realpath(dir.c_str(), nullptr);
  if (!real) return named_error(dir, fmt::format("kernel cache {}: {}", dir, errno_text()));
  const std::string root(real);
  std::free(real);
  // Kernels are loaded as code from here: nobody else may be able to put files in it.
  const TrustedOpen top = open_trusted(root, "", Expect::Directory);
  if (top.status != TrustedOpen::Status::Ok)
    return named_error(dir,
                       fmt::format("kernel cache {}: {}; rope-gen loads code from it, so it must be yours, writable by "
                                   "nobody else, on a path only you or root can change (set ROPEGEN_CACHE_DIR)",
                                   dir, top.status == TrustedOpen::Status::Absent ? "does not exist" : top.why));
  if (auto e = claim_cache_dir(root)) return *e;
  for (const char* sub : {"kernels", "runtime", "objects", "locks", "tmp"}) {
    const std::string path = root + "/" + sub;
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
      return named_error(path, fmt::format("cannot create {}: {}", path, errno_text()));
    const TrustedOpen checked = open_trusted(root, sub, Expect::Directory);
    if (checked.status != TrustedOpen::Status::Ok)
      return named_error(path, fmt::format("kernel cache {}: {}; rope-gen loads code from it", dir, checked.why));
  }
  if (auto e = check_proc_fd(top, dir)) return *e;
  return DiskCache(root, max_bytes, lock_wait);
}

std::string DiskCache::entry_name(const CacheKey& key) { return "kernels/" + key.hex + ".so"; }
std::string DiskCache::runtime_object_name(const CacheKey& key) { return "runtime/" + key.hex + ".o"; }
std::string DiskCache::aot_objects_name(const CacheKey& key) { return "objects/" + key.hex + ".aot"; }

TrustedOpen DiskCache::open_file(const std::string& name) const { return open_trusted(dir_, name, Expect::RegularFile); }

Result<FileLock> DiskCache::lock(const std::string& name, milliseconds wait) const {
  const std::string path = dir_ + "/locks/" + name + ".lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (!fd.valid()) return named_error(path, fmt::format("cannot open lock {}: {}", path, errno_text()));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return named_error(path, fmt::format("lock {} is not a regular file", path));
  // flock has no timeout: poll, backing off, until the deadline.
  const auto deadline = std::chrono::steady_clock::now() + wait;
  milliseconds pause(1);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return named_error(path, fmt::format("cannot lock {}: {}", path, errno_text()));
    if (std::chrono::steady_clock::now() >= deadline)
      return named_error(path, fmt::format("another process has held the lock {} for over {:.1f} s (stopped or hung?)",
                                           path, wait.count() / 1e3));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(50));
  }
  return FileLock(std::move(fd));
}

Result<FileLock> DiskCache::lock_key(const CacheKey& key) const { return lock("key-" + key.hex.substr(0, 2), lock_wait_); }

Result<std::string> DiskCache::make_work_dir() const {
  std::string tmpl = path(std::string("tmp/") + kWorkPrefix + "XXXXXX");
  if (!::mkdtemp(tmpl.data()))
    return named_error(dir_, fmt::format("cannot create a work directory in {}/tmp: {}", dir_, errno_text()));
  return tmpl.substr(dir_.size() + 1);
}

std::optional<Diagnostic> DiskCache::publish(const std::string& sealed_file, const std::string& name) const {
  const std::string target = path(name);
  const auto failure = base::publish_file(sealed_file, target, kCacheFiles);
  if (!failure) return std::nullopt;
  if (failure->refused) return named_error(target, fmt::format("{} is not rope-gen's: left as it is", target));
  return named_error(target, fmt::format("cannot move a new file into {}: {}", target, failure->why));
}

void DiskCache::touch(const CacheKey& key) const { touch(entry_name(key)); }
void DiskCache::touch(const std::string& name) const {
  ::utimensat(AT_FDCWD, path(name).c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
}

bool DiskCache::replaceable(const std::string& name) const {
  return !base::check_replaceable(path(name), kCacheFiles);
}

void DiskCache::remove(const std::string& name) const {
  struct stat st;
  if (removable_file(path(name), &st)) ::unlink(path(name).c_str());
}

std::vector<CacheEntryInfo> DiskCache::entries() const { return list_files(dir_ + "/kernels", ".so", true); }

int DiskCache::evict_to_fit(const std::string& keep) const {
  Result<FileLock> held = lock("evict", kHousekeepingWait);
  if (!held) return 0;
  std::vector<CacheEntryInfo> all = list_files(dir_ + "/kernels", ".so", false);
  std::vector<CacheEntryInfo> objects = list_files(dir_ + "/objects", ".aot", false);
  all.insert(all.end(), objects.begin(), objects.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  uint64_t total = 0;
  for (const auto& e : all) total += e.bytes;
  int evicted = 0;
  for (const auto& e : all) {
    if (total <= max_bytes_) break;
    if (e.key == keep) continue;
    if (::unlink(e.path.c_str()) == 0) ++evicted;
    total -= e.bytes;
  }
  remove_work_dirs(dir_ + "/tmp", fs::file_time_type::clock::now() - kAbandoned);
  return evicted;
}

DiskCache::Cleared DiskCache::clear() const {
  Cleared cleared;
  Result<FileLock> held = lock("evict", lock_wait_);  // cleared even if not: removing is safe without it
  for (const auto& e : list_files(dir_ + "/kernels", ".so", false))
    if (::unlink(e.path.c_str()) == 0) ++cleared.entries, cleared.bytes += e.bytes;
  for (const auto& e : list_files(dir_ + "/objects", ".aot", false))
    if (::unlink(e.path.c_str()) == 0) ++cleared.entries, cleared.bytes += e.bytes;
  for (const auto& e : list_files(dir_ + "/runtime", ".o", false)) ::unlink(e.path.c_str());
  remove_work_dirs(dir_ + "/tmp", fs::file_time_type::max());
  remove("stats");
  return cleared;
}

}  // namespace ropegen::runtime
