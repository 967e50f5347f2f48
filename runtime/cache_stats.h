// The cache's counters across processes: DIR/stats, one "name value" line
// per counter, changed only under the stats lock by writing a new file and
// renaming it over the old one. Each Runtime adds what it counted since its
// last flush, so concurrent processes never lose each other's counts.
#pragma once

#include <optional>
#include <string>

#include "ropegen/runtime.h"
#include "runtime/disk_cache.h"

namespace ropegen::runtime {

// Missing, unreadable or untrusted counters read as zero: the stats file
// is advisory.
CacheCounters read_stats(const DiskCache& cache);
std::optional<Diagnostic> add_to_stats(const DiskCache& cache, const CacheCounters& delta);

}  // namespace ropegen::runtime
