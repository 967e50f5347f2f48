#include "npy.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli_error.h"
#include "npy_header.h"

namespace ropegen::cli {
namespace {

std::string npy_bytes_raw(const char* descr, const void* data, size_t size, const std::vector<int64_t>& shape) {
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, npy_shape_tuple(shape));
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), size);
  return out;
}

[[noreturn]] void wrong_data_size(const NpyHeader& h, uint64_t found, const std::string& name) {
  fail(fmt::format("{}: expected {} bytes of data for shape {} ({}), found {}", name, h.data_bytes,
                   npy_shape_tuple(h.shape), h.dtype, found));
}

class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) fail(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    if (::fstat(fd_, &st_) != 0) fail(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    if (S_ISDIR(st_.st_mode)) fail(fmt::format("cannot read {}: it is a directory", path));
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Regular files know their size before they are read; pipes do not.
  bool size_known() const { return S_ISREG(st_.st_mode); }
  uint64_t size() const { return static_cast<uint64_t>(st_.st_size); }

  // Appends until `out` holds `limit` bytes or the file ends, in chunks,
  // so memory grows with what the file really holds.
  void read_up_to(std::string& out, uint64_t limit) {
    constexpr size_t kChunk = size_t{1} << 24;
    while (out.size() < limit) {
      const size_t old = out.size();
      const size_t want = static_cast<size_t>(std::min<uint64_t>(limit - old, kChunk));
      out.resize(old + want);
      ssize_t n;
      do n = ::read(fd_, out.data() + old, want);
      while (n < 0 && errno == EINTR);
      if (n < 0) fail(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
      out.resize(old + static_cast<size_t>(n));
      if (n == 0) return;
    }
  }

 private:
  std::string path_;
  int fd_;
  struct stat st_ {};
};

}  // namespace

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // checked against overflow when read
  return n;
}

std::string npy_bytes(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  return npy_bytes_raw("<f4", values.data(), values.size() * sizeof(float), shape);
}

std::string npy_bytes(const std::vector<int64_t>& values, const std::vector<int64_t>& shape) {
  return npy_bytes_raw("<i8", values.data(), values.size() * sizeof(int64_t), shape);
}

std::string npy_bytes(const std::vector<uint8_t>& values, const std::vector<int64_t>& shape) {
  return npy_bytes_raw("|u1", values.data(), values.size(), shape);
}

NpyArray parse_npy(std::string_view bytes, const std::string& name) {
  const NpyHeader h = parse_npy_header(bytes, name);
  if (bytes.size() - h.data_offset != h.data_bytes) wrong_data_size(h, bytes.size() - h.data_offset, name);
  NpyArray a{h.dtype, h.shape, {}};
  a.data.assign(bytes.begin() + h.data_offset, bytes.end());
  return a;
}

NpyArray read_npy(const std::string& path) {
  InputFile file(path);
  std::string bytes;
  file.read_up_to(bytes, kNpyPreambleBytes + kMaxNpyHeaderBytes);
  const NpyHeader h = parse_npy_header(bytes, path);
  const uint64_t total = h.data_offset + h.data_bytes;
  if (total < h.data_offset) wrong_data_size(h, file.size_known() ? file.size() - h.data_offset : 0, path);
  if (file.size_known() && file.size() != total) {
    if (file.size() < h.data_offset) fail(fmt::format("{}: truncated .npy file", path));
    wrong_data_size(h, file.size() - h.data_offset, path);
  }
  try {
    // One byte more than needed tells trailing data from the exact size.
    file.read_up_to(bytes, total + 1);
    if (bytes.size() > total)  // a pipe: how much more is not known
      fail(fmt::format("{}: more than the {} bytes of data shape {} ({}) needs", path, h.data_bytes,
                       npy_shape_tuple(h.shape), h.dtype));
    return parse_npy(bytes, path);
  } catch (const std::bad_alloc&) {
    fail(fmt::format("{}: out of memory reading {} bytes of data for shape {}", path, h.data_bytes,
                     npy_shape_tuple(h.shape)));
  }
}

NpyInts npy_ints(const NpyArray& a, const std::string& path, const char* role) {
  if (a.dtype != "<i4" && a.dtype != "<i8")
    fail(fmt::format("{} ({}) has dtype {}; {} must be int32 or int64", role, path, a.dtype, role));
  NpyInts out{a.shape, std::vector<int64_t>(a.elements()), a.dtype == "<i8"};
  for (int64_t i = 0; i < a.elements(); ++i) {
    if (out.is_int64) {
      std::memcpy(&out.values[i], a.data.data() + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, a.data.data() + 4 * i, 4);
      out.values[i] = v;
    }
  }
  return out;
}

NpyInts read_npy_ints(const std::string& path, const char* role) { return npy_ints(read_npy(path), path, role); }

}  // namespace ropegen::cli
