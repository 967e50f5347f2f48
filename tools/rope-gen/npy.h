// NumPy .npy files (format 1.0-3.0, little-endian, C order), enough for the
// CLI's tensors: float32 / float64 / int32 / int64. Reading is bounded: the
// header is checked (npy_header.h) and the data size compared with the file
// before anything is allocated for it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ropegen::cli {

struct NpyArray {
  std::string dtype;              // numpy descr: "<f4", "<f8", "<i4", "<i8", "|u1"
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;

  int64_t elements() const;
};

std::string npy_bytes(const std::vector<float>& values, const std::vector<int64_t>& shape);
std::string npy_bytes(const std::vector<int64_t>& values, const std::vector<int64_t>& shape);
std::string npy_bytes(const std::vector<uint8_t>& values, const std::vector<int64_t>& shape);  // uint8 (fp8 codes)
// Throws CliError naming the file for anything it cannot read.
NpyArray read_npy(const std::string& path);
// The same for a whole file already in memory; `name` is used in errors.
NpyArray parse_npy(std::string_view bytes, const std::string& name);

// Integer ids (positions, cu_seqlens): int32 or int64, widened; `role`
// names them in errors.
struct NpyInts {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
  bool is_int64 = false;
};
NpyInts npy_ints(const NpyArray& a, const std::string& path, const char* role);
NpyInts read_npy_ints(const std::string& path, const char* role);

}  // namespace ropegen::cli
