#include "base/file_write.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ropegen::base {
namespace {

// A new temporary file next to `target`, created as open(2) creates files
// (0666 less the umask, applied by the kernel: the umask is never changed,
// which would race with other threads), never over an existing name.
int create_temporary(const std::string& prefix, std::string* name) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    *name = prefix + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
            std::to_string(static_cast<unsigned long long>(now) % 1000000007ull);
    const int fd = ::open(name->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

WriteFailure failed(int err) { return {false, std::strerror(err)}; }

}  // namespace

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

bool write_all(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;
    if (n <= 0) return false;
    p += n, bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool write_new_file(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  if (write_all(fd, bytes.data(), bytes.size())) {
    if (::close(fd) == 0) return true;
  } else {
    const int saved = errno;
    ::close(fd);
    errno = saved;
  }
  const int saved = errno;
  ::unlink(path.c_str());  // ours: created above with O_EXCL
  errno = saved;
  return false;
}

std::optional<WriteFailure> check_replaceable(const std::string& path, const ReplaceRules& rules) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    return failed(errno);
  }
  if (!S_ISREG(st.st_mode)) return WriteFailure{true, std::string("it is ") + file_kind(st.st_mode)};
  if (rules.only_own_files && st.st_uid != ::geteuid()) return WriteFailure{true, "another user's file"};
  return std::nullopt;
}

std::optional<WriteFailure> publish_file(const std::string& from, const std::string& to, const ReplaceRules& rules) {
  if (auto refused = check_replaceable(to, rules)) return refused;
  if (std::rename(from.c_str(), to.c_str()) != 0) return failed(errno);
  if (rules.sync_dir) {
    // The rename is durable once the directory is synced.
    const std::filesystem::path parent = std::filesystem::path(to).parent_path();
    const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
  return std::nullopt;
}

std::optional<WriteFailure> write_file_atomically(const std::string& to, std::string_view bytes,
                                                  const ReplaceRules& rules) {
  namespace fs = std::filesystem;
  if (auto refused = check_replaceable(to, rules)) return refused;
  const fs::path target(to);
  struct stat existing {};
  const bool replacing = ::stat(target.c_str(), &existing) == 0;
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp;
  const int fd = create_temporary((dir / ("." + target.filename().string() + ".tmp")).string(), &tmp);
  if (fd < 0) return WriteFailure{false, "cannot create a file in " + dir.string() + ": " + std::strerror(errno)};
  int err = write_all(fd, bytes.data(), bytes.size()) ? 0 : errno;
  // A replaced file keeps its mode and, where allowed (root), its owner;
  // elsewhere it becomes the caller's, as any rewrite would.
  if (err == 0 && replacing && ::fchown(fd, existing.st_uid, existing.st_gid) != 0) errno = 0;
  if (err == 0 && ((replacing && ::fchmod(fd, existing.st_mode & 07777) != 0) || ::fsync(fd) != 0)) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  std::optional<WriteFailure> failure;
  if (err != 0) failure = failed(err);
  else failure = publish_file(tmp, to, rules);
  if (failure) ::unlink(tmp.c_str());
  return failure;
}

}  // namespace ropegen::base
