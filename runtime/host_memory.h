// Sizes a caller asks for (rope-gen table --max-pos, bench --shape), checked
// before anything is allocated: the product overflow-checked and no larger
// than this machine's physical memory. A typo then is a diagnostic naming the
// size, not std::bad_alloc or the OOM killer (overcommit would let a huge
// allocation succeed and the process die on first touch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ropegen/result.h"

namespace ropegen::runtime {

// count x item_bytes for each (count, item_bytes), summed; `what` names the
// request in the diagnostic (e.g. "--shape 4,4096,32").
Result<uint64_t> host_bytes_for(const std::vector<std::pair<int64_t, int64_t>>& parts, const std::string& what);

// Product of dims, or a diagnostic naming them when it overflows int64.
Result<int64_t> element_count(const std::vector<int64_t>& dims, const std::string& what);

}  // namespace ropegen::runtime
