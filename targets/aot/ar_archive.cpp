#include "ar_archive.h"

#include <fmt/format.h>

namespace ropegen::targets::aot {
namespace {

constexpr std::string_view kMagic = "!<arch>\n";
constexpr size_t kHeaderSize = 60;

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// A header's decimal field: digits, then spaces.
bool parse_decimal(std::string_view field, size_t& value) {
  field = trim_right(field);
  if (field.empty() || field.size() > 12) return false;
  value = 0;
  for (char c : field) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<size_t>(c - '0');
  }
  return true;
}

bool is_symbol_table(std::string_view name) {
  return name == "/" || name == "/SYM64/" || name == "__.SYMDEF" || name == "__.SYMDEF SORTED";
}

}  // namespace

Result<std::vector<ArchiveMember>> read_ar_archive(std::string_view bytes, const std::string& where) {
  auto error = [&](size_t at, const std::string& what) {
    return named_error(where, fmt::format("not a readable ar archive (at byte {}): {}", at, what));
  };
  if (bytes.substr(0, kMagic.size()) != kMagic) return error(0, "no \"!<arch>\" magic (a thin archive?)");
  std::vector<ArchiveMember> members;
  std::string_view long_names;
  for (size_t at = kMagic.size(); at < bytes.size();) {
    if (bytes.size() - at < kHeaderSize) return error(at, "a member header runs past the end");
    const std::string_view header = bytes.substr(at, kHeaderSize);
    if (header.substr(58, 2) != "`\n") return error(at, "a member header without its \"`\\n\" terminator");
    size_t size = 0;
    if (!parse_decimal(header.substr(48, 10), size)) return error(at + 48, "a member size that is not a number");
    const size_t data_at = at + kHeaderSize;
    if (size > bytes.size() - data_at) return error(at, "a member runs past the end");
    std::string_view data = bytes.substr(data_at, size);
    std::string_view name = trim_right(header.substr(0, 16));
    if (name == "//") {
      long_names = data;
    } else if (!is_symbol_table(name)) {
      if (name.substr(0, 3) == "#1/") {  // BSD: the name opens the data
        size_t length = 0;
        if (!parse_decimal(name.substr(3), length) || length > data.size()) return error(at, "a bad BSD long name");
        name = data.substr(0, length);
        data.remove_prefix(length);
        while (!name.empty() && name.back() == '\0') name.remove_suffix(1);
      } else if (name.size() > 1 && name[0] == '/') {  // GNU: an offset into the "//" table
        size_t offset = 0;
        if (!parse_decimal(name.substr(1), offset) || offset >= long_names.size())
          return error(at, "a long name outside the name table");
        const size_t end = long_names.find("/\n", offset);
        if (end == std::string_view::npos) return error(at, "an unterminated long name");
        name = long_names.substr(offset, end - offset);
      } else if (!name.empty() && name.back() == '/') {  // GNU: "name/"
        name.remove_suffix(1);
      }
      if (name.empty() || name.find('/') != std::string_view::npos || name == "." || name == "..")
        return error(at, "a member without a plain file name");
      members.push_back({std::string(name), data});
    }
    at = data_at + size + (size & 1);
  }
  return members;
}

}  // namespace ropegen::targets::aot
