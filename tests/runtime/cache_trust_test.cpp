// What another user on the machine can do to a kernel cache, done as that
// user (a throwaway account, when the tests run as root; they skip, saying
// so, otherwise): plant a kernel whose constructor writes a marker file —
// sealed with the right tag and checksum, which anyone can compute — in a
// writable kernels/ or runtime/ directory, own the cache directory or a
// parent of it, or swap the cache after it was opened. The planted code
// must never run, nothing of theirs is deleted, and the kernel still comes
// (JIT-compiled) with the refusal counted. The first test shows that the
// plant does run when the checks let it through.
#include <gtest/gtest.h>

#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>

#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_key.h"
#include "runtime/disk_cache.h"
#include "runtime/fd_io.h"
#include "support/other_user.h"
#include "support/run_command.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_OTHER_USER() \
  if (!other_) GTEST_SKIP() << other_why_

RopeSpec spec_named(const std::string& name) { return parse_spec("name: " + name + "\nhead_dim: 16\n", "test").value(); }

lowering::KernelVariant q_only() {
  lowering::KernelVariant v;
  v.position_type = IdType::Int32;
  return v;
}

std::string key_name(const RopeSpec& spec) {
  return runtime::DiskCache::entry_name(runtime::cache_key(spec, q_only(), Halide::get_host_target()));
}

class CacheTrust : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { other_ = test::create_other_user(&other_why_); }
  static void TearDownTestSuite() {
    if (other_) test::remove_other_user(*other_);
  }
  void SetUp() override {
    base_ = test::make_temp_dir();
    fs::permissions(base_, fs::perms(0755));  // the other user may look in
    marker_ = base_ + "/planted-code-ran";
    shared_ = base_ + "/shared";  // where the other user may create things, like /tmp
    fs::create_directory(shared_);
    fs::permissions(shared_, fs::perms(01777));
  }
  void TearDown() override { fs::remove_all(base_); }

  // A shared object whose constructor writes marker_, or with
  // `runtime_object` that object's contents plus the constructor; sealed
  // as a cache file for `tag`: its bytes.
  std::string plant(const std::string& tag, const std::string& runtime_object = "") {
    const std::string src = base_ + "/plant.c", out = base_ + "/plant.out", ctor = base_ + "/ctor.o";
    test::write_text(src, "#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {\n"
                          "  FILE* f = fopen(\"" + marker_ + "\", \"w\");\n  if (f) fclose(f);\n}\n");
    fs::remove(out);
    const std::string build = runtime_object.empty()
                                  ? "cc -fPIC -shared -o " + out + " " + src
                                  : "cc -fPIC -c -o " + ctor + " " + src + " && ld -r -o " + out + " " + ctor + " " + runtime_object;
    const test::CommandResult r = test::run_command(build);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(runtime::seal_entry(out, tag).has_value());
    return test::read_text(out);
  }
  // `bytes` written to `path` by the other user.
  void write_as_other(const std::string& path, const std::string& bytes) {
    ASSERT_TRUE(test::run_as(*other_, [&] { return runtime::write_new_file(path, bytes) && ::chmod(path.c_str(), 0644) == 0; }))
        << path;
  }
  // A kernel of `spec` from a fresh Runtime on `dir`: it must come, whatever the cache holds.
  CacheCounters get(const std::string& dir, const RopeSpec& spec) {
    Runtime r(RuntimeOptions{dir, uint64_t{1} << 30});
    Result<std::shared_ptr<Kernel>> kernel = r.get(spec, q_only());
    EXPECT_TRUE(kernel.ok()) << (kernel.ok() ? "" : format(kernel.errors()));
    return r.counters();
  }
  // A cache that exists, with its subdirectories.
  std::string make_cache(const std::string& dir) {
    EXPECT_TRUE(runtime::DiskCache::open(dir, 1 << 30).ok());
    return dir;
  }

  static std::optional<test::OtherUser> other_;
  static std::string other_why_;
  std::string base_, marker_, shared_;
};

std::optional<test::OtherUser> CacheTrust::other_;
std::string CacheTrust::other_why_;

TEST_F(CacheTrust, APlantedKernelRunsWhereTheChecksLetItThrough) {
  // The checksum and tag are no protection: a plant in a file the cache
  // trusts (this user's own) is loaded, and its code runs.
  const RopeSpec spec = spec_named("a");
  const std::string cache = make_cache(base_ + "/cache");
  const runtime::CacheKey key = runtime::cache_key(spec, q_only(), Halide::get_host_target());
  ASSERT_TRUE(runtime::write_new_file(cache + "/" + key_name(spec), plant(key.text)));
  const CacheCounters c = get(cache, spec);
  EXPECT_TRUE(fs::exists(marker_));
  EXPECT_EQ(c.damaged_evicted, 1u);  // it is no kernel: removed and rebuilt
  EXPECT_EQ(c.compiles, 1u);
}

TEST_F(CacheTrust, AnEntryInAWorldWritableKernelsDirectoryNeverRuns) {
  REQUIRE_OTHER_USER();
  const RopeSpec spec = spec_named("a");
  const std::string cache = make_cache(base_ + "/cache"), entry = cache + "/" + key_name(spec);
  fs::permissions(cache, fs::perms(0755));
  fs::permissions(cache + "/kernels", fs::perms(0777));
  write_as_other(entry, plant(runtime::cache_key(spec, q_only(), Halide::get_host_target()).text));
  CacheCounters c = get(cache, spec);
  EXPECT_FALSE(fs::exists(marker_));
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(c.jit_fallbacks, 1u);
  EXPECT_NE(c.last_fallback.find("kernels is writable by others"), std::string::npos) << c.last_fallback;
  // The directory made private again: the file is still the other user's.
  fs::permissions(cache + "/kernels", fs::perms(0700));
  c = get(cache, spec);
  EXPECT_FALSE(fs::exists(marker_));
  EXPECT_EQ(c.refused, 1u);
  EXPECT_NE(c.last_fallback.find("belongs to another user"), std::string::npos) << c.last_fallback;
  EXPECT_TRUE(fs::exists(entry));  // not rope-gen's to delete
}

TEST_F(CacheTrust, AHalideRuntimeObjectFromAnotherUserIsNeverLinked) {
  REQUIRE_OTHER_USER();
  const RopeSpec spec = spec_named("a");
  const std::string tag = runtime::runtime_object_key(Halide::get_host_target()).text;
  const std::string runtime_name = runtime::DiskCache::runtime_object_name(runtime::runtime_object_key(Halide::get_host_target()));
  // Halide's real runtime object, as a cache makes it, with a constructor added.
  const std::string model = make_cache(base_ + "/model");
  get(model, spec_named("model"));
  std::string real;
  {
    runtime::UniqueFd fd(::open((model + "/" + runtime_name).c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_EQ(runtime::check_entry(fd.get(), tag, &real).status, runtime::EntryCheck::Status::Ok);
  }
  ASSERT_TRUE(runtime::write_new_file(base_ + "/real_runtime.o", real));
  const std::string planted = plant(tag, base_ + "/real_runtime.o");
  // Linked from a file of this user's, the object's constructor runs with the kernel.
  const std::string mine = make_cache(base_ + "/mine");
  ASSERT_TRUE(runtime::write_new_file(mine + "/" + runtime_name, planted));
  get(mine, spec);
  ASSERT_TRUE(fs::exists(marker_));
  fs::remove(marker_);

  const std::string cache = make_cache(base_ + "/cache");
  fs::permissions(cache, fs::perms(0755));
  fs::permissions(cache + "/runtime", fs::perms(0777));
  write_as_other(cache + "/" + runtime_name, planted);
  const CacheCounters c = get(cache, spec);
  EXPECT_FALSE(fs::exists(marker_));
  EXPECT_GE(c.refused, 1u);
  EXPECT_EQ(c.jit_fallbacks, 1u);
  EXPECT_EQ(c.compiles, 0u);
  EXPECT_TRUE(fs::exists(cache + "/" + runtime_name));
}

TEST_F(CacheTrust, AnEntryOthersCouldHaveWrittenOrALinkIsNotLoaded) {
  const RopeSpec spec = spec_named("a");
  const std::string tag = runtime::cache_key(spec, q_only(), Halide::get_host_target()).text;
  const std::string cache = make_cache(base_ + "/cache"), entry = cache + "/" + key_name(spec);
  for (const fs::perms mode : {fs::perms(0666), fs::perms(0620)}) {
    fs::remove(entry);
    ASSERT_TRUE(runtime::write_new_file(entry, plant(tag)));
    fs::permissions(entry, mode);
    const CacheCounters c = get(cache, spec);
    EXPECT_FALSE(fs::exists(marker_));
    EXPECT_EQ(c.refused, 1u);
    EXPECT_NE(c.last_fallback.find("is writable by others"), std::string::npos) << c.last_fallback;
    EXPECT_TRUE(fs::exists(entry));
  }
  // A link to a file the checks would pass: links are not followed.
  fs::remove(entry);
  ASSERT_TRUE(runtime::write_new_file(base_ + "/elsewhere.so", plant(tag)));
  fs::create_symlink(base_ + "/elsewhere.so", entry);
  CacheCounters c = get(cache, spec);
  EXPECT_FALSE(fs::exists(marker_));
  EXPECT_EQ(c.refused, 1u);
  EXPECT_NE(c.last_fallback.find("is a symbolic link"), std::string::npos) << c.last_fallback;
  // kernels/ itself a link to a directory holding the plant.
  fs::create_directory(base_ + "/linked");
  fs::rename(base_ + "/elsewhere.so", base_ + "/" + key_name(spec).replace(0, 7, "linked"));
  fs::remove_all(cache + "/kernels");
  fs::create_directory_symlink(base_ + "/linked", cache + "/kernels");
  c = get(cache, spec);
  EXPECT_FALSE(fs::exists(marker_));
  EXPECT_EQ(c.refused, 1u);
  EXPECT_NE(c.last_fallback.find("kernels is a symbolic link"), std::string::npos) << c.last_fallback;
}

TEST_F(CacheTrust, ACacheDirectoryOfAnotherUserIsRefused) {
  REQUIRE_OTHER_USER();
  const RopeSpec spec = spec_named("a");
  const std::string theirs = shared_ + "/theirs";
  // A whole cache, marker and entry included, made by the other user.
  const std::string marker_file = test::read_text(make_cache(base_ + "/model") + "/CACHEDIR.TAG");
  const std::string planted = plant(runtime::cache_key(spec, q_only(), Halide::get_host_target()).text);
  ASSERT_TRUE(test::run_as(*other_, [&] {
    return ::mkdir(theirs.c_str(), 0755) == 0 && ::mkdir((theirs + "/kernels").c_str(), 0755) == 0 &&
           runtime::write_new_file(theirs + "/CACHEDIR.TAG", marker_file) &&
           runtime::write_new_file(theirs + "/" + key_name(spec), planted);
  }));
  const Result<runtime::DiskCache> opened = runtime::DiskCache::open(theirs, 1 << 30);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.errors()[0].message.find("belongs to another user"), std::string::npos);
  const CacheCounters c = get(theirs, spec);
  EXPECT_FALSE(fs::exists(marker_));
  EXPECT_EQ(c.refused, 1u);
  EXPECT_EQ(c.jit_fallbacks, 1u);
}

TEST_F(CacheTrust, ParentsMayBeChangedOnlyByYouOrRoot) {
  auto open_under = [&](const std::string& parent, fs::perms mode) {
    fs::create_directory(parent);
    fs::permissions(parent, mode);
    return runtime::DiskCache::open(parent + "/cache", 1 << 30);
  };
  // Writable by others and not sticky: they could rename the cache away and put theirs in its place.
  Result<runtime::DiskCache> opened = open_under(base_ + "/open", fs::perms(0777));
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.errors()[0].message.find(base_ + "/open is writable by others"), std::string::npos);
  // Sticky, like /tmp: others may add names but not move this user's.
  EXPECT_TRUE(open_under(base_ + "/sticky", fs::perms(01777)).ok());
  if (!other_) GTEST_SKIP() << other_why_;
  const std::string theirs = shared_ + "/theirs";
  ASSERT_TRUE(test::run_as(*other_, [&] { return ::mkdir(theirs.c_str(), 0755) == 0; }));
  opened = runtime::DiskCache::open(theirs + "/cache", 1 << 30);  // root may create it there; still not safe
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.errors()[0].message.find(theirs + " belongs to another user"), std::string::npos);
}

TEST_F(CacheTrust, ACacheSwappedAfterItWasOpenedIsRefused) {
  REQUIRE_OTHER_USER();
  const RopeSpec first = spec_named("a"), second = spec_named("b");
  const std::string parent = base_ + "/p", cache = parent + "/cache";
  fs::create_directory(parent);
  fs::permissions(parent, fs::perms(0755));
  const std::string marker_file = test::read_text(make_cache(cache) + "/CACHEDIR.TAG");
  const std::string planted = plant(runtime::cache_key(second, q_only(), Halide::get_host_target()).text);
  Runtime r(RuntimeOptions{cache, uint64_t{1} << 30});
  ASSERT_TRUE(r.get(first, q_only()).ok());  // the cache is open and was checked
  EXPECT_EQ(r.counters().compiles, 1u);
  // Then the parent becomes writable by the other user, who swaps the cache for theirs.
  fs::permissions(parent, fs::perms(0777));
  ASSERT_TRUE(test::run_as(*other_, [&] {
    return ::rename(cache.c_str(), (parent + "/moved").c_str()) == 0 && ::mkdir(cache.c_str(), 0755) == 0 &&
           ::mkdir((cache + "/kernels").c_str(), 0755) == 0 && runtime::write_new_file(cache + "/CACHEDIR.TAG", marker_file) &&
           runtime::write_new_file(cache + "/" + key_name(second), planted);
  }));
  ASSERT_TRUE(r.get(second, q_only()).ok());
  EXPECT_FALSE(fs::exists(marker_));
  EXPECT_EQ(r.counters().refused, 1u);
  EXPECT_EQ(r.counters().jit_fallbacks, 1u);
}

TEST_F(CacheTrust, ClearLeavesFilesOfOtherUsersAlone) {
  REQUIRE_OTHER_USER();
  const RopeSpec spec = spec_named("a");
  const std::string cache = make_cache(base_ + "/cache");
  get(cache, spec);
  fs::permissions(cache, fs::perms(0755));
  for (const char* sub : {"kernels", "runtime", "tmp"}) fs::permissions(cache + "/" + sub, fs::perms(0777));
  const std::vector<std::string> theirs = {cache + "/kernels/0123456789abcdef.so", cache + "/runtime/0123456789abcdef.o",
                                           cache + "/tmp/build-abcdef"};
  ASSERT_TRUE(test::run_as(*other_, [&] {
    return runtime::write_new_file(theirs[0], "x") && runtime::write_new_file(theirs[1], "x") &&
           ::mkdir(theirs[2].c_str(), 0755) == 0;
  }));
  for (const char* sub : {"kernels", "runtime", "tmp"}) fs::permissions(cache + "/" + sub, fs::perms(0700));
  const runtime::DiskCache::Cleared cleared = runtime::DiskCache::open(cache, 1 << 30).value().clear();
  EXPECT_EQ(cleared.entries, 1);
  EXPECT_FALSE(fs::exists(cache + "/" + key_name(spec)));
  for (const std::string& f : theirs) EXPECT_TRUE(fs::exists(f)) << f;
}

}  // namespace
}  // namespace ropegen
