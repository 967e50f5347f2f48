#include "fd_io.h"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>


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

}  // namespace ropegen::runtime
