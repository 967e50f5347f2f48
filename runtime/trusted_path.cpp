#include "trusted_path.h"

#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace ropegen::runtime {
namespace {

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(path);
  for (std::string name; std::getline(in, name, '/');)
    if (!name.empty()) out.push_back(name);
  return out;
}

// Why `st` (at `path`) cannot be trusted, or nullopt. Above the root a
// sticky directory may be writable by others.
std::optional<std::string> untrusted(const struct stat& st, bool above_root, const std::string& path) {
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return fmt::format("{} belongs to another user (uid {})", path, st.st_uid);
  const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(above_root && sticky_dir))
    return fmt::format("{} is writable by others (mode {:04o})", path, st.st_mode & 07777);
  return std::nullopt;
}

TrustedOpen refused(std::string why) {
  TrustedOpen t;
  t.status = TrustedOpen::Status::Refused;
  t.why = std::move(why);
  return t;
}

}  // namespace

bool owned_by_me(const struct stat& st) { return st.st_uid == ::geteuid(); }

TrustedOpen open_trusted(const std::string& root, const std::string& relative, Expect expect) {
  if (root.empty() || root[0] != '/') return refused(fmt::format("{}: not an absolute path", root));
  const std::vector<std::string> above = components(root), below = components(relative);
  std::vector<std::string> names = above;
  names.insert(names.end(), below.begin(), below.end());

  TrustedOpen t;
  t.fd = UniqueFd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::string path;
  for (size_t i = 0; i <= names.size(); ++i) {
    const bool last = i == names.size();
    const bool is_file = last && expect == Expect::RegularFile;
    if (i > 0) {
      const std::string& name = names[i - 1];
      path += "/" + name;
      if (is_file) {
        // Look before opening: opening a FIFO blocks, opening a device may act.
        struct stat pre;
        if (::fstatat(t.fd.get(), name.c_str(), &pre, AT_SYMLINK_NOFOLLOW) != 0)
          return errno == ENOENT ? TrustedOpen{} : refused(fmt::format("{}: {}", path, std::strerror(errno)));
        if (S_ISLNK(pre.st_mode)) return refused(fmt::format("{} is a symbolic link", path));
        if (!S_ISREG(pre.st_mode)) return refused(fmt::format("{} is not a regular file", path));
      }
      const int flags = O_CLOEXEC | O_NOFOLLOW | (is_file ? O_RDONLY | O_NONBLOCK : O_PATH | O_DIRECTORY);
      UniqueFd next(::openat(t.fd.get(), name.c_str(), flags));
      if (!next.valid()) {
        const int error = errno;
        if (error == ENOENT) return TrustedOpen{};
        struct stat link;  // O_NOFOLLOW | O_DIRECTORY on a link says ENOTDIR
        if (error == ELOOP || (::fstatat(t.fd.get(), name.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(link.st_mode)))
          return refused(fmt::format("{} is a symbolic link", path));
        if (error == ENOTDIR) return refused(fmt::format("{} is not a directory", path));
        return refused(fmt::format("{}: {}", path, std::strerror(error)));
      }
      t.fd = std::move(next);
    }
    if (::fstat(t.fd.get(), &t.st) != 0) return refused(fmt::format("{}: {}", path, std::strerror(errno)));
    if (is_file && !S_ISREG(t.st.st_mode)) return refused(fmt::format("{} is not a regular file", path));
    if (auto why = untrusted(t.st, i < above.size(), path.empty() ? "/" : path)) return refused(*why);
  }
  t.status = TrustedOpen::Status::Ok;
  return t;
}

}  // namespace ropegen::runtime
