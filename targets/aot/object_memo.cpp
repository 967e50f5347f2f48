#include "object_memo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace ropegen::targets::aot {
namespace {

bool is_memo_file_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name[0] != '.' && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace

// Per file: "<name> <size>\n" then the bytes.
std::string pack_memo_files(const MemoFiles& files) {
  std::string out;
  for (const MemoFile& f : files) out += fmt::format("{} {}\n", f.name, f.bytes.size()) + f.bytes;
  return out;
}

std::optional<MemoFiles> unpack_memo_files(const std::string& bytes) {
  MemoFiles files;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t space = bytes.find(' ', at), end = bytes.find('\n', at);
    if (space == std::string::npos || end == std::string::npos || space > end) return std::nullopt;
    MemoFile f{bytes.substr(at, space - at), {}};
    size_t size = 0;
    const auto [p, ec] = std::from_chars(bytes.data() + space + 1, bytes.data() + end, size);
    if (ec != std::errc() || p != bytes.data() + end || !is_memo_file_name(f.name)) return std::nullopt;
    at = end + 1;
    if (size > bytes.size() - at) return std::nullopt;
    f.bytes = bytes.substr(at, size);
    at += size;
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace ropegen::targets::aot
