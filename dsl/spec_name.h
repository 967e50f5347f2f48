// What a spec's name may be: [a-z_][a-z0-9_]*, at most kMaxNameLength
// characters. It prefixes every emitted symbol and is never a path; from-hf
// checks a name it is given by the same rule.
#pragma once

#include <cstddef>
#include <string>

namespace ropegen::dsl {

inline constexpr size_t kMaxNameLength = 64;

bool is_identifier(const std::string& s);

}  // namespace ropegen::dsl
