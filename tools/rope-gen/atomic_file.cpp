#include "atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_error.h"

namespace ropegen::cli {

void write_file_atomically(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) fail("cannot create a file in " + dir.string() + ": " + std::strerror(errno));
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
  // mkstemp creates 0600; give the file the usual permissions.
  ::fchmod(fd, 0644);
  if (::fsync(fd) != 0 || ::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    fail("cannot write " + path + ": " + why);
  }
}

}  // namespace ropegen::cli
