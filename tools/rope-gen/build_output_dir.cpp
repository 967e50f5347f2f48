#include "build_output_dir.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_error.h"
#include "dsl/regular_file.h"

namespace ropegen::cli {
namespace {

namespace fs = std::filesystem;

// A manifest lists a few dozen files: anything far larger is not one.
constexpr size_t kMaxManifestBytes = size_t{1} << 20;

// The files a previous build listed in DIR/manifest.json; empty when there
// is none or it is not rope-gen's. A manifest.json that is no regular file
// (a FIFO would block the read, a directory is no manifest) is refused.
std::set<std::string> previous_build_files(const fs::path& dir) {
  const fs::path path = dir / "manifest.json";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return {};
  const Result<std::string> text = dsl::read_regular_file(path.string(), kMaxManifestBytes);
  if (!text)
    fail(fmt::format("-o {}: cannot read {}: {}; pick a new or empty directory", dir.string(), path.string(),
                     text.errors().front().message));
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() ||
      j["format"].get<std::string>().rfind("rope-gen-aot-library/", 0) != 0 || !j.contains("files") ||
      !j["files"].is_object())
    return {};
  std::set<std::string> files = {"manifest.json"};
  for (const auto& [role, value] : j["files"].items()) {
    if (value.is_string()) files.insert(value.get<std::string>());
    if (value.is_array())
      for (const auto& name : value)
        if (name.is_string()) files.insert(name.get<std::string>());
  }
  return files;
}

// A staging directory a build left behind is rope-gen's own.
bool is_staging_dir(const fs::path& p) { return p.filename().string().rfind(".rope-gen-build-", 0) == 0; }

}  // namespace

BuildOutputDir::BuildOutputDir(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return;
  if (!fs::is_directory(dir_, ec)) fail(fmt::format("-o {}: exists and is not a directory", dir_.string()));
  ours_ = previous_build_files(dir_);
  if (!ours_.empty()) return;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec))
    if (!is_staging_dir(e.path()))
      fail(fmt::format("-o {}: the directory holds files rope-gen did not write (no rope-gen manifest.json), such as "
                       "{}; pick a new or empty directory",
                       dir_.string(), e.path().filename().string()));
  if (ec) fail(fmt::format("-o {}: cannot list it: {}", dir_.string(), ec.message()));
}

void BuildOutputDir::check_replaceable(const std::vector<std::string>& files) const {
  for (const std::string& f : files) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(dir_ / f, ec);
    if (!fs::exists(st)) continue;
    if (!ours_.count(f) || !fs::is_regular_file(st))
      fail(fmt::format("-o {}: would replace {}, which the previous rope-gen build there did not write; pick a new or "
                       "empty directory",
                       dir_.string(), f));
  }
}

}  // namespace ropegen::cli
