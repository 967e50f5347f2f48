// The outputs of one command, checked before any work is done: each must be
// a file rope-gen may write (atomic_file.h), and no two may be the same file
// (by device and inode when they exist, by resolved path when they do not),
// which would keep only the last. An output may be one of the command's
// inputs: every command reads all of its inputs before writing anything.
#pragma once

#include <string>
#include <vector>

namespace ropegen::cli {

struct OutputFile {
  std::string flag;  // as the user wrote it: "--out-q"
  std::string path;  // empty: not given
};

void check_outputs(const std::vector<OutputFile>& outputs);

}  // namespace ropegen::cli
