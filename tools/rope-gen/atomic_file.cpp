#include "atomic_file.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli_error.h"
#include "dsl/regular_file.h"

namespace ropegen::cli {
namespace {

// New files get what open(2) would give them: 0666 less the umask.
mode_t new_file_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

void write_all(int fd, std::string_view bytes, const std::string& tmp, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("cannot write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string output_destination(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;  // a new file
    fail(fmt::format("{} {}: {}", flag, path, std::strerror(errno)));
  }
  std::string destination = path;
  if (S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (!::realpath(path.c_str(), resolved))
      fail(fmt::format("{} {}: a symlink that does not resolve ({}); rope-gen does not create files through symlinks",
                       flag, path, std::strerror(errno)));
    destination = resolved;
    if (::stat(destination.c_str(), &st) != 0) fail(fmt::format("{} {}: {}", flag, path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode))
    fail(fmt::format("{} {}: is {}; rope-gen writes regular files only", flag, path, dsl::file_kind(st.st_mode)));
  return destination;
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(output_destination("output", path));
  struct stat existing {};
  const bool replacing = ::stat(target.c_str(), &existing) == 0;
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) fail("cannot create a file in " + dir.string() + ": " + std::strerror(errno));
  write_all(fd, bytes, tmp, path);
  // A replaced file keeps its mode and, where allowed (root), its owner;
  // elsewhere it becomes the caller's, as any rewrite would.
  if (replacing && ::fchown(fd, existing.st_uid, existing.st_gid) != 0) errno = 0;
  int err = 0;
  if (::fchmod(fd, replacing ? existing.st_mode & 07777 : new_file_mode()) != 0 || ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), target.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    fail("cannot write " + path + ": " + std::strerror(err));
  }
}

}  // namespace ropegen::cli
