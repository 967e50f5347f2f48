#include "cache_key.h"

#include <fmt/format.h>

#include <cstring>
#include <sstream>

#include "base/hash.h"
#include "ropegen/spec_io.h"
#include "ropegen_source_id.h"  // generated: cmake/source_id.cmake

namespace ropegen::runtime {
namespace {

// Bump when the entry layout, the symbols or the argument binding change.
// 2: keys and checksums are XXH3 64 (base/hash). 3: the sources' hash
// (ROPEGEN_SOURCE_ID) in place of the linker's build id.
constexpr int kCacheFormat = 3;

// Kernels bake in constants the lowering computes in double on the host. The
// sources' hash stands for them only while the compiler keeps that arithmetic
// IEEE (the same bits from an -O3 and a sanitizer build); a build that may
// reassociate or contract it into FMAs computes other bits: its own keys.
#if defined(__FAST_MATH__)
constexpr const char* kHostMath = "fast-math";
#elif defined(__FP_FAST_FMA)
constexpr const char* kHostMath = "fma";
#else
constexpr const char* kHostMath = "ieee";
#endif

}  // namespace

std::string variant_tag(const RopeSpec& spec, const lowering::KernelVariant& variant) {
  std::string tag = variant.with_k ? "qk" : "q";
  if (spec.positions == PositionsMode::Explicit) tag += variant.position_type == IdType::Int64 ? "_i64" : "_i32";
  if (variant.backward) tag += "_backward";
  if (spec.kv_cache.enabled) tag += variant.with_v ? "_kv" : "_k_cache";
  if (variant.float32_norm_weights) tag += "_wf32";
  return tag;
}

namespace {

// Every key: what it names and the cache format, then the sources and the
// Halide that compile it, then its own fields.
CacheKey key_of(const char* kind, const std::string& fields) {
  CacheKey key;
  key.text = fmt::format("{} {}\nrope-gen {} {} {}\nhalide {}.{}.{}\n{}", kind, kCacheFormat, ROPEGEN_VERSION,
                         ROPEGEN_SOURCE_ID, kHostMath, HALIDE_VERSION_MAJOR, HALIDE_VERSION_MINOR, HALIDE_VERSION_PATCH,
                         fields);
  key.hex = base::hash_hex(key.text);
  return key;
}

}  // namespace

CacheKey cache_key(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target) {
  return key_of("rope-gen-kernel-cache", fmt::format("target {}\nvariant {}\nspec {} {}\n", target.to_string(),
                                                     variant_tag(spec, variant), spec_hash(spec), spec.name));
}

CacheKey runtime_object_key(const Halide::Target& target) {
  return key_of("rope-gen-halide-runtime", fmt::format("target {}\n", target.to_string()));
}

CacheKey aot_objects_key(const std::string& what) { return key_of("rope-gen-aot-objects", what); }

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

uint64_t checksum64(const void* data, size_t bytes) { return base::hash64(data, bytes); }

}  // namespace ropegen::runtime
