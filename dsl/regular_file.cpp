#include "regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ropegen::dsl {
namespace {

Diagnostic reason(const std::string& path, std::string why) { return {{path, -1, -1}, std::move(why), {}}; }

// Closes the descriptor on every way out.
struct OpenFile {
  int fd;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::string> read_regular_file(const std::string& path, size_t limit) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const OpenFile file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) return reason(path, std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return reason(path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return reason(path, fmt::format("it is {}", file_kind(st.st_mode)));
  std::string text(limit, '\0');
  size_t size = 0;
  while (size < text.size()) {
    const ssize_t n = ::read(file.fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return reason(path, std::strerror(errno));
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  text.resize(size);
  return text;
}

}  // namespace ropegen::dsl
