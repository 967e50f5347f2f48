// Whole reads and writes on file descriptors, retrying short transfers and
// EINTR, so that every failure (a full disk included) is a false return
// with errno set, never a partial file taken for a whole one.
#pragma once

#include <string>
#include <string_view>

#include <sys/types.h>

#include "base/file_write.h"

namespace ropegen::runtime {

bool read_at(int fd, void* out, size_t bytes, off_t offset);
// The writes are base/file_write's.
using base::write_all;
using base::write_new_file;

}  // namespace ropegen::runtime
