#include "cache_marker.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/fd_io.h"
#include "runtime/trusted_path.h"

namespace ropegen::runtime {
namespace {

constexpr std::string_view kMarker =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# rope-gen kernel cache, layout 1. rope-gen only deletes the files of its own format in here.\n";

Diagnostic refuse(const std::string& root, const std::string& why) {
  return named_error(
      root, fmt::format("kernel cache {}: {}; rope-gen only writes to and deletes from a directory it created, "
                        "so it will not use this one: set ROPEGEN_CACHE_DIR to a new or empty directory",
                        root, why));
}

bool is_empty_dir(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_empty(dir, ec) && !ec;
}

// The marker's content, from a trusted descriptor; anything longer than
// rope-gen's marker is read as far as needed to tell it is not.
std::string read_marker(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return {};
  std::string text(std::min<size_t>(static_cast<size_t>(st.st_size), kMarker.size() + 1), '\0');
  return read_at(fd, text.data(), text.size(), 0) ? text : std::string();
}

// Creates the marker; false if another process created it first.
std::optional<bool> write_marker(const std::string& root, std::string* why) {
  const std::string path = root + "/" + kCacheMarkerName;
  if (write_new_file(path, kMarker)) return true;
  if (errno == EEXIST) return false;
  *why = fmt::format("cannot write {}: {}", path, std::strerror(errno));
  return std::nullopt;
}

}  // namespace

std::optional<Diagnostic> claim_cache_dir(const std::string& root) {
  // Another process may be between creating the marker and writing it: a
  // short, bounded wait for its content.
  for (int attempt = 0; attempt < 100; ++attempt) {
    TrustedOpen marker = open_trusted(root, kCacheMarkerName, Expect::RegularFile);
    if (marker.status == TrustedOpen::Status::Refused) return refuse(root, marker.why);
    if (marker.status == TrustedOpen::Status::Ok) {
      const std::string text = read_marker(marker.fd.get());
      if (text == kMarker) return std::nullopt;
      if (text.size() >= kMarker.size() || kMarker.compare(0, text.size(), text) != 0)
        return refuse(root, fmt::format("its {} was not written by rope-gen", kCacheMarkerName));
    } else {
      if (!is_empty_dir(root)) {
        // Another process may have adopted it since the marker was looked
        // for (it writes the marker, then its directories): look again.
        if (open_trusted(root, kCacheMarkerName, Expect::RegularFile).status != TrustedOpen::Status::Absent) continue;
        return refuse(root, fmt::format("not empty, and not a rope-gen cache (no {})", kCacheMarkerName));
      }
      std::string why;
      const std::optional<bool> created = write_marker(root, &why);
      if (!created) return named_error(root, "kernel cache: " + why);
      if (*created) return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return refuse(root, fmt::format("its {} stays incomplete", kCacheMarkerName));
}

}  // namespace ropegen::runtime
