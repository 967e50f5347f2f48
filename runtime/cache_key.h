// Which compiled kernel a request names. Everything that changes the
// compiled code is in the key: the normalised spec (by its hash), the
// kernel variant, the exact target, rope-gen's version and build, Halide's
// version and the cache format. The key's text doubles as the ABI tag
// sealed into each cache entry, so a file that was written for anything
// else is never loaded.
#pragma once

#include <string>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"

namespace ropegen::runtime {

struct CacheKey {
  std::string text;  // one "field value" line per input (the ABI tag)
  std::string hex;   // 16 hex digits of XXH3 64 over text (base/hash): names the entry's file and symbols
};

// "q", "qk", and for explicit positions "q_i32", "qk_i64", ...: the AOT
// entry-point suffixes. Implicit-position specs ignore the position type.
std::string variant_tag(const RopeSpec& spec, const lowering::KernelVariant& variant);

CacheKey cache_key(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target);

// Halide's runtime compiled for `target`: the same object is linked into
// every kernel for that target, so it is compiled once per cache.
CacheKey runtime_object_key(const Halide::Target& target);

// Objects of an AOT build (targets/aot/object_memo.h): `what` names the
// entry, spec and targets; the key adds the sources and Halide's version.
CacheKey aot_objects_key(const std::string& what);

// The fields of a key's text (for `rope-gen cache list`); empty where the
// text has no such line.
struct KeyFields {
  std::string spec_name, spec_hash, variant, target, rope_gen;
};
KeyFields key_fields(const std::string& text);

// XXH3 64 (base/hash): fast enough (many GB/s) to check a whole entry on
// every load. It guards against truncation and damage, not against an attacker.
uint64_t checksum64(const void* data, size_t bytes);

}  // namespace ropegen::runtime
