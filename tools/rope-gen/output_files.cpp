#include "output_files.h"

#include <filesystem>
#include <sys/stat.h>

#include <fmt/format.h>

#include "atomic_file.h"
#include "cli_error.h"

namespace ropegen::cli {
namespace {

// What makes two outputs the same file.
std::string identity(const std::string& destination) {
  struct stat st {};
  if (::stat(destination.c_str(), &st) == 0) return fmt::format("inode {}:{}", st.st_dev, st.st_ino);
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(std::filesystem::absolute(destination), ec);
  return "path " + (ec ? destination : resolved.string());
}

}  // namespace

void check_outputs(const std::vector<OutputFile>& outputs) {
  std::vector<std::pair<const OutputFile*, std::string>> seen;
  for (const OutputFile& o : outputs) {
    if (o.path.empty()) continue;
    const std::string id = identity(output_destination(o.flag, o.path));
    for (const auto& [other, other_id] : seen)
      if (other_id == id)
        fail(fmt::format("{} {} and {} {} are the same file: each output needs its own", other->flag, other->path, o.flag,
                         o.path));
    seen.emplace_back(&o, id);
  }
}

}  // namespace ropegen::cli
