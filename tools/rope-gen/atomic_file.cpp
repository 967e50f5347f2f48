#include "atomic_file.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

#include <fmt/format.h>

#include "base/file_write.h"
#include "cli_error.h"

namespace ropegen::cli {

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
    fail(fmt::format("{} {}: is {}; rope-gen writes regular files only", flag, path, base::file_kind(st.st_mode)));
  return destination;
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  // The user named the output: any regular file may be replaced (output_destination resolved its symlinks).
  if (const auto failure = base::write_file_atomically(output_destination("output", path), bytes, {}))
    fail("cannot write " + path + ": " + failure->why);
}

}  // namespace ropegen::cli
