// Which directories are rope-gen kernel caches: those holding rope-gen's
// CACHEDIR.TAG (the Cache Directory Tagging signature, so backup tools skip
// the cache, then a line naming rope-gen and the layout). rope-gen writes
// it only into a directory that is empty; a non-empty directory without it
// belongs to someone else, and rope-gen never writes or deletes anything
// there (ROPEGEN_CACHE_DIR=$HOME must not cost the user ~/tmp).
#pragma once

#include <optional>

#include "ropegen/diagnostics.h"

namespace ropegen::runtime {

inline constexpr const char* kCacheMarkerName = "CACHEDIR.TAG";

// `root` (canonical, already checked as trusted) is a rope-gen cache, or is
// empty and becomes one now; otherwise a diagnostic saying why not.
std::optional<Diagnostic> claim_cache_dir(const std::string& root);

}  // namespace ropegen::runtime
