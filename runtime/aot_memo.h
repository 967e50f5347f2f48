// The kernel cache as the memo of `rope-gen build` (targets/aot/object_memo.h):
// each compiled entry's objects are one sealed file, objects/<key>.aot, in the
// cache directory (disk_cache.h): trusted, checked, evicted and cleared like
// the kernels, and shared by every build of the same sources.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/disk_cache.h"
#include "targets/aot/object_memo.h"

namespace ropegen::runtime {

class AotMemo final : public targets::aot::ObjectMemo {
 public:
  explicit AotMemo(DiskCache cache) : cache_(std::move(cache)) {}
  std::optional<targets::aot::MemoFiles> find(const std::string& what) override;
  void keep(const std::string& what, const targets::aot::MemoFiles& files) override;

 private:
  DiskCache cache_;
};

// The memo in the kernel cache directory the environment names
// (RuntimeOptions::from_environment); nullptr when there is none or it cannot
// be used (ROPEGEN_VERBOSE=1 says why): the build then compiles everything.
std::unique_ptr<AotMemo> open_aot_memo();

}  // namespace ropegen::runtime
