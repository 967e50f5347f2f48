#include "cache_key.h"

#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "ropegen/spec_io.h"
#include "runtime/build_id.h"

namespace ropegen::runtime {
namespace {

// Bump when the entry layout, the symbols or the argument binding change.
constexpr int kCacheFormat = 1;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

std::string variant_tag(const RopeSpec& spec, const lowering::KernelVariant& variant) {
  std::string tag = variant.with_k ? "qk" : "q";
  if (spec.positions == PositionsMode::Explicit) tag += variant.position_type == IdType::Int64 ? "_i64" : "_i32";
  if (variant.backward) tag += "_backward";
  return tag;
}

CacheKey cache_key(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target) {
  CacheKey key;
  key.text = fmt::format(
      "rope-gen-kernel-cache {}\n"
      "rope-gen {} {}\n"
      "halide {}.{}.{}\n"
      "target {}\n"
      "variant {}\n"
      "spec {} {}\n",
      kCacheFormat, ROPEGEN_VERSION, code_build_id(), HALIDE_VERSION_MAJOR, HALIDE_VERSION_MINOR,
      HALIDE_VERSION_PATCH, target.to_string(), variant_tag(spec, variant), spec_hash(spec), spec.name);
  key.hex = fmt::format("{:016x}", fnv1a(key.text));
  return key;
}

CacheKey runtime_object_key(const Halide::Target& target) {
  CacheKey key;
  key.text = fmt::format(
      "rope-gen-halide-runtime {}\n"
      "rope-gen {} {}\n"
      "halide {}.{}.{}\n"
      "target {}\n",
      kCacheFormat, ROPEGEN_VERSION, code_build_id(), HALIDE_VERSION_MAJOR, HALIDE_VERSION_MINOR, HALIDE_VERSION_PATCH,
      target.to_string());
  key.hex = fmt::format("{:016x}", fnv1a(key.text));
  return key;
}

KeyFields key_fields(const std::string& text) {
  KeyFields f;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string field;
    words >> field;
    if (field == "spec") words >> f.spec_hash >> f.spec_name;
    else if (field == "variant") words >> f.variant;
    else if (field == "target") words >> f.target;
    else if (field == "rope-gen") words >> f.rope_gen;
  }
  return f;
}

uint64_t checksum64(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  // Each step is invertible in h, so changing any one word always changes
  // the result; the shift carries high bits down so that changes in two
  // words cannot cancel the way they can with a bare multiply.
  auto mix = [](uint64_t h, uint64_t word) {
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
  };
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = mix(h, word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, bytes - i);
  return mix(mix(h, tail), bytes);
}

}  // namespace ropegen::runtime
