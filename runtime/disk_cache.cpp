#include "disk_cache.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/cache_entry.h"

namespace ropegen::runtime {
namespace {

namespace fs = std::filesystem;

// A compile takes seconds; a work directory this old was left by a process
// that died.
constexpr auto kAbandoned = std::chrono::hours(1);

Diagnostic error(const std::string& path, std::string message) { return Diagnostic{{path, -1, -1}, std::move(message), {}}; }

std::string errno_text() { return std::strerror(errno); }

bool is_entry_name(const std::string& name) {
  if (name.size() != 19 || name.compare(16, 3, ".so") != 0) return false;
  return std::all_of(name.begin(), name.begin() + 16, [](char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

std::chrono::system_clock::time_point modified(const struct stat& st) {
  using namespace std::chrono;
  return system_clock::time_point(duration_cast<system_clock::duration>(seconds(st.st_mtim.tv_sec) + nanoseconds(st.st_mtim.tv_nsec)));
}

std::optional<Diagnostic> make_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return error(path, fmt::format("cannot create the kernel cache directory {}: {}", path, errno_text()));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return error(path, fmt::format("kernel cache: {} is not a directory", path));
  return std::nullopt;
}

// Entries (files named <key>.so) with size and last use, oldest first.
std::vector<CacheEntryInfo> list_entries(const std::string& kernels, bool with_tags) {
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(kernels, ec)) {
    const std::string name = f.path().filename().string();
    struct stat st;
    if (!is_entry_name(name) || ::stat(f.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    CacheEntryInfo e{name.substr(0, 16), f.path().string(), static_cast<uint64_t>(st.st_size), modified(st), {}};
    if (with_tags) e.tag = read_entry_tag(e.path);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  return out;
}

}  // namespace

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
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

Result<DiskCache> DiskCache::open(const std::string& dir, uint64_t max_bytes) {
  if (dir.empty()) return error("ROPEGEN_CACHE_DIR", "no kernel cache directory: set ROPEGEN_CACHE_DIR or HOME");
  std::error_code ec;
  const fs::path path(dir);
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (auto e = make_private_dir(dir)) return *e;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return error(dir, fmt::format("kernel cache {}: {}", dir, errno_text()));
  // Kernels are loaded as code from here: nobody else may be able to put files in it.
  if (st.st_uid != ::geteuid())
    return error(dir, fmt::format("kernel cache {} belongs to another user; rope-gen loads code from it, so it must be "
                                  "yours (set ROPEGEN_CACHE_DIR)",
                                  dir));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return error(dir, fmt::format("kernel cache {} is writable by others; rope-gen loads code from it: chmod go-w {}", dir, dir));
  for (const char* sub : {"kernels", "runtime", "locks", "tmp"})
    if (auto e = make_private_dir(dir + "/" + sub)) return *e;
  return DiskCache(dir, max_bytes);
}

std::string DiskCache::entry_path(const CacheKey& key) const { return dir_ + "/kernels/" + key.hex + ".so"; }
std::string DiskCache::runtime_object_path(const CacheKey& key) const { return dir_ + "/runtime/" + key.hex + ".o"; }

Result<FileLock> DiskCache::lock(const std::string& name) const {
  const std::string path = dir_ + "/locks/" + name + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return error(path, fmt::format("cannot open lock {}: {}", path, errno_text()));
  FileLock held(fd);
  while (::flock(fd, LOCK_EX) != 0)
    if (errno != EINTR) return error(path, fmt::format("cannot lock {}: {}", path, errno_text()));
  return Result<FileLock>(std::move(held));
}

Result<FileLock> DiskCache::lock_key(const CacheKey& key) const { return lock("key-" + key.hex.substr(0, 2)); }

Result<std::string> DiskCache::make_work_dir() const {
  std::string tmpl = dir_ + "/tmp/build-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return error(dir_, fmt::format("cannot create a work directory in {}/tmp: {}", dir_, errno_text()));
  return tmpl;
}

std::optional<Diagnostic> DiskCache::publish(const std::string& sealed_file, const std::string& path) const {
  if (::rename(sealed_file.c_str(), path.c_str()) != 0)
    return error(path, fmt::format("cannot move a new file into {}: {}", path, errno_text()));
  // The rename is durable once the directory is synced.
  const int fd = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  return std::nullopt;
}

void DiskCache::touch(const CacheKey& key) const { ::utimensat(AT_FDCWD, entry_path(key).c_str(), nullptr, 0); }

void DiskCache::remove(const std::string& path) const { ::unlink(path.c_str()); }

std::vector<CacheEntryInfo> DiskCache::entries() const { return list_entries(dir_ + "/kernels", true); }

int DiskCache::evict_to_fit(const std::string& keep) const {
  Result<FileLock> held = lock("evict");
  if (!held) return 0;
  std::vector<CacheEntryInfo> all = list_entries(dir_ + "/kernels", false);
  uint64_t total = 0;
  for (const auto& e : all) total += e.bytes;
  int evicted = 0;
  for (const auto& e : all) {
    if (total <= max_bytes_) break;
    if (e.key == keep) continue;
    if (::unlink(e.path.c_str()) == 0) ++evicted;
    total -= e.bytes;
  }
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& w : fs::directory_iterator(dir_ + "/tmp", ec))
    if (now - fs::last_write_time(w.path(), ec) > kAbandoned) fs::remove_all(w.path(), ec);
  return evicted;
}

DiskCache::Cleared DiskCache::clear() const {
  Cleared cleared;
  Result<FileLock> held = lock("evict");
  for (const auto& e : list_entries(dir_ + "/kernels", false))
    if (::unlink(e.path.c_str()) == 0) ++cleared.entries, cleared.bytes += e.bytes;
  std::error_code ec;
  for (const char* sub : {"/runtime", "/tmp"})
    for (const auto& f : fs::directory_iterator(dir_ + sub, ec)) fs::remove_all(f.path(), ec);
  ::unlink((dir_ + "/stats").c_str());
  return cleared;
}

}  // namespace ropegen::runtime
