#include "npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_error.h"

namespace ropegen::cli {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::string shape_tuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

int dtype_size(const std::string& descr) {
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<f8" || descr == "<i8") return 8;
  return 0;
}

}  // namespace

std::string npy_bytes_raw(const char* descr, const void* data, size_t size, const std::vector<int64_t>& shape);

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string npy_bytes(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  return npy_bytes_raw("<f4", values.data(), values.size() * sizeof(float), shape);
}

std::string npy_bytes(const std::vector<int64_t>& values, const std::vector<int64_t>& shape) {
  return npy_bytes_raw("<i8", values.data(), values.size() * sizeof(int64_t), shape);
}

std::string npy_bytes_raw(const char* descr, const void* data, size_t size, const std::vector<int64_t>& shape) {
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_tuple(shape));
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(data), size);
  return out;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(fmt::format("cannot read {} (does it exist?)", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) fail(fmt::format("{} is not a .npy file", path));
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  } else {
    fail(fmt::format("{}: unsupported .npy version {}", path, major));
  }
  if (bytes.size() < header_start + header_len) fail(fmt::format("{}: truncated .npy header", path));
  const std::string header = bytes.substr(header_start, header_len);

  static const std::regex descr_re(R"('descr':\s*'([^']*)')");
  static const std::regex order_re(R"('fortran_order':\s*(True|False))");
  static const std::regex shape_re(R"('shape':\s*\(([^)]*)\))");
  std::smatch m;
  NpyArray a;
  if (!std::regex_search(header, m, descr_re)) fail(fmt::format("{}: .npy header has no dtype", path));
  a.dtype = m[1];
  if (dtype_size(a.dtype) == 0)
    fail(fmt::format("{}: dtype {} is not supported; use float32, float64, int32 or int64 (little-endian)", path, a.dtype));
  if (std::regex_search(header, m, order_re) && m[1] == "True")
    fail(fmt::format("{}: Fortran-ordered arrays are not supported; save with np.ascontiguousarray", path));
  if (!std::regex_search(header, m, shape_re)) fail(fmt::format("{}: .npy header has no shape", path));
  std::stringstream dims(m[1].str());
  std::string item;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos) continue;
    a.shape.push_back(std::stoll(item));
  }
  const size_t need = static_cast<size_t>(a.elements()) * dtype_size(a.dtype);
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start != need)
    fail(fmt::format("{}: expected {} bytes of data for shape {}, found {}", path, need, shape_tuple(a.shape),
                     bytes.size() - data_start));
  a.data.assign(bytes.begin() + data_start, bytes.end());
  return a;
}

NpyInts read_npy_ints(const std::string& path, const char* role) {
  const NpyArray a = read_npy(path);
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

}  // namespace ropegen::cli
