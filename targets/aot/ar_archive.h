// Reading the members of a Unix `ar` archive (System V/GNU, with the "//"
// long-name table, and BSD "#1/len" names), every offset checked against the
// bytes: rope-gen merges the objects of the call library it embeds
// (call/, built with rope-gen) into each AOT library's archive.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ropegen/result.h"

namespace ropegen::targets::aot {

struct ArchiveMember {
  std::string name;
  std::string_view data;  // into the archive's bytes
};

// The members in archive order, without the symbol tables ("/", "/SYM64/",
// "__.SYMDEF") and the long-name table. `where` names the archive in errors.
Result<std::vector<ArchiveMember>> read_ar_archive(std::string_view bytes, const std::string& where);

}  // namespace ropegen::targets::aot
