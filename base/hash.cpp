#include "base/hash.h"

#include <cstdio>

#include <xxhash.h>

namespace ropegen::base {

uint64_t hash64(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string hash_hex(std::string_view text) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash64(text)));
  return hex;
}

}  // namespace ropegen::base
