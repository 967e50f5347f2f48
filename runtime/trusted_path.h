// Opening files of the kernel cache so that only code this user could have
// written is ever used. Every component from "/" down is opened with
// O_NOFOLLOW relative to the previous one and checked on its descriptor
// (fstat), at the moment of use; the caller then reads (or dlopens, through
// /proc/self/fd) exactly the file that was checked, so nothing can be
// swapped in between.
//
// What is trusted:
//  - above the cache root: directories owned by this user or root, not
//    writable by group or others unless sticky (like /tmp, root's and
//    1777: others may add names there but cannot rename or remove ours);
//  - the cache root and everything in it: owned by this user (or root),
//    not writable by group or others, no symbolic links; files regular.
// A directory or file that passes can only be changed by this user or root,
// so what was checked stays true while it is used.
#pragma once

#include <string>

#include <sys/stat.h>

#include "runtime/unique_fd.h"

namespace ropegen::runtime {

struct TrustedOpen {
  enum class Status { Ok, Absent, Refused };
  Status status = Status::Absent;
  UniqueFd fd;      // Ok: the checked file (read-only) or directory (O_PATH)
  struct stat st{};  // Ok: its fstat
  std::string why;  // Refused: what is wrong, naming the path
};

enum class Expect { Directory, RegularFile };

// `root` is an absolute path without symbolic links (realpath); `relative`
// a path below it, or "" for the root itself. A file is opened with
// O_NONBLOCK, and only after fstatat saw a regular file, so a FIFO or a
// device can neither block nor be opened.
TrustedOpen open_trusted(const std::string& root, const std::string& relative, Expect expect);

// Whether this process created-and-owns a file: what rope-gen may remove.
bool owned_by_me(const struct stat& st);

}  // namespace ropegen::runtime
