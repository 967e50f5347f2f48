// The header of a .npy file (format 1.0-3.0): magic, version, length and
// the Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}.
// Parsed by hand, bounded and without recursion: a hostile file can only
// get a CliError naming it, never a crash, a huge allocation or a wrapped size.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ropegen::cli {

// Longer headers are refused (numpy's own reader stops at 10000 bytes).
constexpr size_t kMaxNpyHeaderBytes = 65536;
// Magic (6) + version (2) + the longest length field (4).
constexpr size_t kNpyPreambleBytes = 12;
constexpr size_t kMaxNpyDims = 32;

struct NpyHeader {
  std::string dtype;             // "<f4", "<f8", "<i4", "<i8" or "|u1"
  std::vector<int64_t> shape;
  int64_t elements = 0;          // the product of shape, overflow-checked
  uint64_t data_offset = 0;      // where the data starts in the file
  uint64_t data_bytes = 0;       // elements * item size, overflow-checked
};

// `prefix` is the file's first bytes: at least the whole header, or the
// whole file when it is shorter. `name` is the file as the user wrote it.
NpyHeader parse_npy_header(std::string_view prefix, const std::string& name);

std::string npy_shape_tuple(const std::vector<int64_t>& shape);

}  // namespace ropegen::cli
