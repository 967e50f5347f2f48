#include "aot_memo.h"

#include <filesystem>

#include "ropegen/runtime.h"
#include "runtime/cache_entry.h"
#include "runtime/fd_io.h"

namespace ropegen::runtime {
std::optional<targets::aot::MemoFiles> AotMemo::find(const std::string& what) {
  const CacheKey key = aot_objects_key(what);
  const std::string name = DiskCache::aot_objects_name(key);
  const TrustedOpen file = cache_.open_file(name);
  if (file.status == TrustedOpen::Status::Refused) verbose_note(cache_.path(name) + ": " + file.why);
  if (file.status != TrustedOpen::Status::Ok) return std::nullopt;
  std::string payload;
  const EntryCheck check = check_entry(file.fd.get(), key.text, &payload);
  std::optional<targets::aot::MemoFiles> files;
  if (check.status == EntryCheck::Status::Ok) files = targets::aot::unpack_memo_files(payload);
  if (!files) {
    verbose_note("removing " + cache_.path(name) + ": " + (check.why.empty() ? "not a list of files" : check.why));
    cache_.remove(name);
    return std::nullopt;
  }
  cache_.touch(name);
  return files;
}

void AotMemo::keep(const std::string& what, const targets::aot::MemoFiles& files) {
  const CacheKey key = aot_objects_key(what);
  Result<std::string> work = cache_.make_work_dir();
  if (!work) return verbose_note(format(work.errors()));
  const std::string dir = cache_.path(*work), file = dir + "/objects.aot";
  if (!write_new_file(file, targets::aot::pack_memo_files(files)))
    verbose_note("cannot write " + file);
  else if (auto e = seal_entry(file, key.text))
    verbose_note(format(*e));
  else if (auto e = cache_.publish(file, DiskCache::aot_objects_name(key)))
    verbose_note(format(*e));
  else
    cache_.evict_to_fit(key.hex);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

std::unique_ptr<AotMemo> open_aot_memo() {
  Result<RuntimeOptions> options = RuntimeOptions::from_environment();
  if (!options) return verbose_note(format(options.errors())), nullptr;
  if (options->cache_dir.empty()) return verbose_note("no cache directory: every build compiles everything"), nullptr;
  Result<DiskCache> cache = DiskCache::open(options->cache_dir, options->max_bytes, options->lock_wait);
  if (!cache) return verbose_note(format(cache.errors())), nullptr;
  return std::make_unique<AotMemo>(std::move(cache).value());
}

}  // namespace ropegen::runtime
