// Writing files: checked writes (every failure, a full disk included, is
// reported, never a partial file taken for a whole one) and the one
// "write a temporary file, then rename it into place" of rope-gen, so that a
// file appears whole or not at all.
//
// A destination is only ever replaced if it is absent or a regular file (not
// a symlink, directory, device, FIFO or socket), and with `only_own_files`,
// one this user owns: rope-gen never renames over a file it could not have
// written. Callers keep their own further rules (the CLI resolves symlinks
// to the regular file they name; the cache names only its own files).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace ropegen::base {

// write(2) until done, retrying EINTR; false with errno set on failure.
bool write_all(int fd, const void* data, size_t bytes);
// Creates `path` (mode 0600; it must not exist, and is not followed if a
// link), writes `bytes`, closes it. On failure the partial file is removed.
bool write_new_file(const std::string& path, std::string_view bytes);

struct ReplaceRules {
  bool only_own_files = false;  // refuse a regular file another user owns (the kernel cache)
  bool sync_dir = false;        // fsync the directory so the rename survives a crash
};

struct WriteFailure {
  bool refused = false;  // the destination is not one the rules let rope-gen replace
  std::string why;       // what it is, or the system's error text
};

// Whether `path` may be renamed over under `rules`: nullopt if so.
std::optional<WriteFailure> check_replaceable(const std::string& path, const ReplaceRules& rules);

// Renames `from` (a complete file on the same file system) to `to`, after
// check_replaceable(to).
std::optional<WriteFailure> publish_file(const std::string& from, const std::string& to, const ReplaceRules& rules);

// `bytes` into `to`, whole or not at all: a temporary file in to's directory
// (removed on failure), checked writes, the mode (and, where allowed, the
// owner) of the file it replaces or else 0666 less the umask (the umask is
// only read by the kernel, never changed), fsync, then publish_file.
std::optional<WriteFailure> write_file_atomically(const std::string& to, std::string_view bytes,
                                                  const ReplaceRules& rules);

// "is a directory", "is a FIFO", ... for messages.
const char* file_kind(mode_t mode);

}  // namespace ropegen::base
