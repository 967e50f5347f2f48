#include "cache_entry.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/cache_key.h"
#include "runtime/fd_io.h"
#include "runtime/unique_fd.h"

namespace ropegen::runtime {
namespace {

constexpr char kMagic[8] = {'R', 'G', 'K', 'E', 'R', 'N', '0', '2'};  // 02: XXH3 checksum
constexpr size_t kTrailerBytes = 32;
// Entries are a few MB; anything claiming more is not ours (and is not
// read into memory).
constexpr uint64_t kMaxTagBytes = 1 << 16;
constexpr uint64_t kMaxEntryBytes = uint64_t{256} << 20;

struct Trailer {
  uint64_t payload_bytes = 0, tag_bytes = 0, checksum = 0;
  char magic[8] = {};
};

void put_u64(unsigned char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_u64(const unsigned char* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}

// The trailer of a file of `size` bytes, if it is well formed.
std::optional<Trailer> read_trailer(int fd, uint64_t size, std::string* why) {
  unsigned char raw[kTrailerBytes];
  if (size > kMaxEntryBytes) {
    *why = fmt::format("{} bytes: too large for an entry", size);
    return std::nullopt;
  }
  if (size < kTrailerBytes || !read_at(fd, raw, kTrailerBytes, static_cast<off_t>(size - kTrailerBytes))) {
    *why = fmt::format("{} bytes: too short for an entry", size);
    return std::nullopt;
  }
  Trailer t{get_u64(raw), get_u64(raw + 8), get_u64(raw + 16), {}};
  std::memcpy(t.magic, raw + 24, 8);
  if (std::memcmp(t.magic, kMagic, 8) != 0) {
    *why = "no rope-gen entry trailer (truncated, or not written by rope-gen)";
    return std::nullopt;
  }
  if (t.tag_bytes > kMaxTagBytes || t.payload_bytes > size || t.payload_bytes + t.tag_bytes + kTrailerBytes != size) {
    *why = fmt::format("sizes in the trailer ({} + {}) do not add up to the file's {} bytes", t.payload_bytes,
                       t.tag_bytes, size);
    return std::nullopt;
  }
  return t;
}

// The first line of `tag` that differs from `expected`, for the message.
std::string first_difference(const std::string& tag, const std::string& expected) {
  std::istringstream a(tag), b(expected);
  std::string x, y;
  while (std::getline(a, x)) {
    if (!std::getline(b, y) || x != y) return x.substr(0, 200);
  }
  return "tag is a prefix of the expected one";
}

}  // namespace

std::optional<Diagnostic> seal_entry(const std::string& path, const std::string& tag) {
  auto fail = [&](const std::string& what) {
    return named_error(path, fmt::format("cannot seal cache entry {}: {}: {}", path, what, std::strerror(errno)));
  };
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fail("open");
  if (::fchmod(fd.get(), 0600) != 0) return fail("chmod");
  std::vector<unsigned char> bytes(static_cast<size_t>(st.st_size) + tag.size());
  if (!read_at(fd.get(), bytes.data(), static_cast<size_t>(st.st_size), 0)) return fail("read");
  std::memcpy(bytes.data() + st.st_size, tag.data(), tag.size());
  unsigned char trailer[kTrailerBytes];
  put_u64(trailer, static_cast<uint64_t>(st.st_size));
  put_u64(trailer + 8, tag.size());
  put_u64(trailer + 16, checksum64(bytes.data(), bytes.size()));
  std::memcpy(trailer + 24, kMagic, 8);
  if (::lseek(fd.get(), 0, SEEK_END) < 0 || !write_all(fd.get(), tag.data(), tag.size()) ||
      !write_all(fd.get(), trailer, kTrailerBytes))
    return fail("write");
  if (::fsync(fd.get()) != 0) return fail("fsync");
  if (::close(fd.release()) != 0) return fail("close");
  return std::nullopt;
}

EntryCheck check_entry(int fd, const std::string& expected_tag, std::string* payload) {
  using Status = EntryCheck::Status;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return {Status::Damaged, "not a regular file"};
  EntryCheck check{Status::Damaged, {}};
  const std::optional<Trailer> t = read_trailer(fd, static_cast<uint64_t>(st.st_size), &check.why);
  if (!t) return check;
  std::vector<unsigned char> bytes(t->payload_bytes + t->tag_bytes);
  if (!read_at(fd, bytes.data(), bytes.size(), 0)) return {Status::Damaged, "unreadable"};
  if (checksum64(bytes.data(), bytes.size()) != t->checksum) return {Status::Damaged, "checksum mismatch"};
  const std::string tag(reinterpret_cast<const char*>(bytes.data() + t->payload_bytes), t->tag_bytes);
  if (tag != expected_tag) return {Status::Foreign, "sealed for another key (" + first_difference(tag, expected_tag) + ")"};
  if (payload) payload->assign(reinterpret_cast<const char*>(bytes.data()), t->payload_bytes);
  return {Status::Ok, {}};
}

std::optional<std::string> read_entry_tag(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string why;
  const std::optional<Trailer> t = read_trailer(fd.get(), static_cast<uint64_t>(st.st_size), &why);
  if (!t) return std::nullopt;
  std::string tag(t->tag_bytes, '\0');
  if (!read_at(fd.get(), tag.data(), tag.size(), static_cast<off_t>(t->payload_bytes))) return std::nullopt;
  return tag;
}

}  // namespace ropegen::runtime
