// rope-gen's one hash: XXH3 64 (libxxhash). Spec hashes, cache keys and the
// cache entries' checksums all use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ropegen::base {

uint64_t hash64(const void* data, size_t bytes);
inline uint64_t hash64(std::string_view text) { return hash64(text.data(), text.size()); }
// hash64 as 16 lowercase hex digits.
std::string hash_hex(std::string_view text);

}  // namespace ropegen::base
