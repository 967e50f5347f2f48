// Compiled entry points kept between builds. A build asks for an entry's
// objects by a text naming everything of the spec and targets its compile
// depends on; the memo (the kernel cache's: runtime/aot_memo.h) adds
// rope-gen's sources and Halide's version to that key. Without a memo,
// every build compiles everything.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ropegen::targets::aot {

struct MemoFile {
  std::string name;  // a plain file name: letters, digits, '_', '-', '.'; no leading '.'
  std::string bytes;
};
using MemoFiles = std::vector<MemoFile>;

class ObjectMemo {
 public:
  virtual ~ObjectMemo() = default;
  // The files kept for `what`; nullopt when there are none (or none that can be used).
  virtual std::optional<MemoFiles> find(const std::string& what) = 0;
  // Keeps `files` for `what` (best effort: a memo that cannot keep them says nothing).
  virtual void keep(const std::string& what, const MemoFiles& files) = 0;
};

// One byte string holding the files (names and sizes in front of each), and back;
// nullopt for bytes that are not such a string or name a file otherwise than a
// plain file name (the names become file names in the build's directories).
std::string pack_memo_files(const MemoFiles& files);
std::optional<MemoFiles> unpack_memo_files(const std::string& bytes);

}  // namespace ropegen::targets::aot
