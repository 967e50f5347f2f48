#include "npy_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_error.h"

namespace ropegen::cli {
namespace {

constexpr std::string_view kMagic("\x93NUMPY", 6);

int dtype_size(const std::string& descr) {
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<f8" || descr == "<i8") return 8;
  if (descr == "|u1") return 1;  // fp8 KV caches' codes
  return 0;
}

// A cursor over the dict literal; every error names the file and the byte.
class DictReader {
 public:
  DictReader(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  [[noreturn]] void error(const std::string& what) const {
    fail(fmt::format("{}: bad .npy header at byte {} of its dict: {}", name_, pos_, what));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool accept(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (accept(c)) return;
    error(pos_ < text_.size() ? fmt::format("expected '{}', found '{}'", c, text_[pos_]) : fmt::format("expected '{}', found the end", c));
  }
  bool accept_word(std::string_view word) {
    skip_space();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  std::string string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') error("expected a quoted string");
    const size_t end = text_.find(quote, ++pos_);
    if (end == std::string_view::npos) error("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    if (s.find('\\') != std::string::npos) error("escapes in strings are not supported");
    pos_ = end + 1;
    return s;
  }
  // A non-negative decimal integer that fits int64.
  int64_t dimension() {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '-') error("a dimension is negative");
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') error("expected a dimension (a decimal integer)");
    int64_t value = 0;
    for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; ++pos_)
      if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, text_[pos_] - '0', &value))
        error("a dimension is larger than 2^63 - 1");
    return value;
  }
  std::vector<int64_t> shape() {
    expect('(');
    std::vector<int64_t> dims;
    while (!accept(')')) {
      if (dims.size() == kMaxNpyDims) error(fmt::format("more than {} dimensions", kMaxNpyDims));
      dims.push_back(dimension());
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
  bool boolean() {
    if (accept_word("True")) return true;
    if (accept_word("False")) return false;
    error("expected True or False");
  }

 private:
  std::string_view text_;
  const std::string& name_;
  size_t pos_ = 0;
};

struct DictFields {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

DictFields parse_dict(std::string_view text, const std::string& name) {
  DictReader r(text, name);
  DictFields f;
  bool seen_descr = false, seen_order = false, seen_shape = false;
  auto first_time = [&](bool& seen, const std::string& key) {
    if (seen) r.error(fmt::format("key '{}' appears twice", key));
    seen = true;
  };
  r.expect('{');
  while (!r.accept('}')) {
    const std::string key = r.string();
    r.expect(':');
    if (key == "descr") {
      first_time(seen_descr, key);
      if (r.peek() == '[') r.error("structured dtypes are not supported");
      f.descr = r.string();
    } else if (key == "fortran_order") {
      first_time(seen_order, key);
      f.fortran_order = r.boolean();
    } else if (key == "shape") {
      first_time(seen_shape, key);
      f.shape = r.shape();
    } else {
      r.error(fmt::format("unknown key '{}'", key));
    }
    if (!r.accept(',')) {
      r.expect('}');
      break;
    }
  }
  if (!r.at_end()) r.error("unexpected text after the dict");
  if (!seen_descr || !seen_order || !seen_shape) r.error("it needs the keys 'descr', 'fortran_order' and 'shape'");
  return f;
}

uint32_t little_endian(std::string_view bytes) {
  uint32_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

}  // namespace

std::string npy_shape_tuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

NpyHeader parse_npy_header(std::string_view prefix, const std::string& name) {
  if (prefix.size() < 10 || prefix.substr(0, 6) != kMagic) fail(fmt::format("{} is not a .npy file (no \\x93NUMPY magic)", name));
  const int major = static_cast<unsigned char>(prefix[6]);
  if (major < 1 || major > 3) fail(fmt::format("{}: unsupported .npy version {} (rope-gen reads 1.0 to 3.0)", name, major));
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (prefix.size() < 8 + length_bytes) fail(fmt::format("{}: truncated .npy header", name));
  const uint64_t header_len = little_endian(prefix.substr(8, length_bytes));
  if (header_len > kMaxNpyHeaderBytes)
    fail(fmt::format("{}: .npy header of {} bytes is longer than the {} rope-gen reads", name, header_len, kMaxNpyHeaderBytes));
  const size_t header_start = 8 + length_bytes;
  if (prefix.size() - header_start < header_len)
    fail(fmt::format("{}: truncated .npy header ({} bytes announced, {} present)", name, header_len, prefix.size() - header_start));

  DictFields f = parse_dict(prefix.substr(header_start, header_len), name);
  NpyHeader h;
  h.dtype = std::move(f.descr);
  const int item_size = dtype_size(h.dtype);
  if (item_size == 0 && !h.dtype.empty() && h.dtype[0] == '>')
    fail(fmt::format("{}: dtype {} is big-endian; rope-gen reads little-endian .npy (numpy: a.astype('<{}'))", name,
                     h.dtype, h.dtype.substr(1)));
  if (item_size == 0)
    fail(fmt::format("{}: dtype {} is not supported; use float32, float64, int32 or int64 (little-endian), or uint8", name, h.dtype));
  if (f.fortran_order)
    fail(fmt::format("{}: Fortran-ordered arrays are not supported; save with np.ascontiguousarray", name));
  h.shape = std::move(f.shape);
  h.elements = 1;
  for (int64_t d : h.shape)
    if (__builtin_mul_overflow(h.elements, d, &h.elements))
      fail(fmt::format("{}: shape {} has more than 2^63 elements", name, npy_shape_tuple(h.shape)));
  if (__builtin_mul_overflow(static_cast<uint64_t>(h.elements), static_cast<uint64_t>(item_size), &h.data_bytes))
    fail(fmt::format("{}: shape {} of {} needs more than 2^64 bytes", name, npy_shape_tuple(h.shape), h.dtype));
  h.data_offset = header_start + header_len;
  return h;
}

}  // namespace ropegen::cli
