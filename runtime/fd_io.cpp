#include "fd_io.h"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "runtime/unique_fd.h"

namespace ropegen::runtime {

bool read_at(int fd, void* out, size_t bytes, off_t offset) {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // the file is shorter than it said
    if (n <= 0) return false;
    p += n, bytes -= static_cast<size_t>(n), offset += n;
  }
  return true;
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
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return false;
  if (write_all(fd.get(), bytes.data(), bytes.size()) && ::close(fd.release()) == 0) return true;
  const int saved = errno;
  ::unlink(path.c_str());  // ours: created above with O_EXCL
  errno = saved;
  return false;
}

}  // namespace ropegen::runtime
