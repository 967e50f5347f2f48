// Where `rope-gen build -o DIR` may write: DIR must be new, empty, or a
// library rope-gen built before (its manifest.json says so), and only files
// that manifest lists (and manifest.json) are ever replaced. Anything else,
// such as `-o $HOME`, is refused before compiling: rope-gen never replaces a
// file it did not write.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace ropegen::cli {

class BuildOutputDir {
 public:
  // Throws CliError when DIR holds files rope-gen did not write.
  explicit BuildOutputDir(std::filesystem::path dir);
  // Throws CliError when one of `files` exists in DIR but is not rope-gen's.
  void check_replaceable(const std::vector<std::string>& files) const;

 private:
  std::filesystem::path dir_;
  std::set<std::string> ours_;  // what the previous build's manifest lists
};

}  // namespace ropegen::cli
