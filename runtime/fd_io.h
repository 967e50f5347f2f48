// Whole reads and writes on file descriptors, retrying short transfers and
// EINTR, so that every failure (a full disk included) is a false return
// with errno set, never a partial file taken for a whole one.
#pragma once

#include <string>
#include <string_view>

#include <sys/types.h>

namespace ropegen::runtime {

bool read_at(int fd, void* out, size_t bytes, off_t offset);
bool write_all(int fd, const void* data, size_t bytes);
// Creates `path` (mode 0600; it must not exist, and is not followed if a
// link), writes `bytes`, closes it. On failure the partial file is removed.
bool write_new_file(const std::string& path, std::string_view bytes);

}  // namespace ropegen::runtime
