// The kernel cache where it does not belong or cannot work, through
// `rope-gen` as users run it: a directory that is not a rope-gen cache
// (ROPEGEN_CACHE_DIR=$HOME) is neither adopted nor cleared, clear and
// eviction remove only the cache's own files, a FIFO anywhere in the cache
// blocks nothing, a stopped process holding a lock delays others by a
// bounded wait only, a full file system (a real one: a small tmpfs, when
// root can mount it) is a fallback to JIT, not a crash, and every refusal
// is one warning line and shows in `rope-gen cache stats`.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>

#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/cache_cli.h"
#include "runtime/cache_key.h"
#include "runtime/disk_cache.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class CacheRobustness : public test::CacheCli {
 protected:
  std::string tool(const std::string& cache_dir) const { return env(cache_dir) + ropegen::test::rope_gen_binary(); }
  // The only file in `sub` of a cache.
  static std::string only_file(const std::string& sub) {
    std::vector<std::string> files;
    for (const auto& f : fs::directory_iterator(sub)) files.push_back(f.path().string());
    EXPECT_EQ(files.size(), 1u) << sub;
    return files.empty() ? sub + "/none" : files[0];
  }
};

void make_old(const std::string& path) { fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(3)); }

TEST_F(CacheRobustness, ANonEmptyDirectoryIsNeverAdoptedNorCleared) {
  const std::string want = jit_outputs();
  const std::string home = dir_ + "/home";
  fs::create_directories(home + "/tmp/project");
  const std::vector<std::string> mine = {home + "/tmp/old-notes.txt", home + "/tmp/project/main.c", home + "/stats",
                                         home + "/runtime/readme"};
  fs::create_directories(home + "/runtime");
  for (const std::string& f : mine) test::write_text(f, "the user's");
  for (const std::string& f : mine) make_old(f);
  make_old(home + "/tmp/project");

  test::CommandResult r = test::run_command(apply("1", home));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(outputs("1") == want);
  EXPECT_THAT(r.err, HasSubstr("warning: kernel cache " + home + ": not empty, and not a rope-gen cache"));
  r = test::run_command(tool(home) + " cache clear");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("not a rope-gen cache"));
  EXPECT_EQ(test::run_command(tool(home) + " cache stats").exit_code, 2);
  for (const std::string& f : mine) EXPECT_EQ(test::read_text(f), "the user's") << f;
  EXPECT_FALSE(fs::exists(home + "/CACHEDIR.TAG"));
  EXPECT_FALSE(fs::exists(home + "/kernels"));

  // Another program's cache tag is not rope-gen's.
  const std::string other = dir_ + "/other-cache";
  fs::create_directory(other);
  test::write_text(other + "/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# another program\n");
  r = test::run_command(apply("2", other));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("CACHEDIR.TAG was not written by rope-gen"));
  EXPECT_FALSE(fs::exists(other + "/kernels"));

  // An empty directory becomes a cache.
  const std::string empty = dir_ + "/empty";
  fs::create_directory(empty);
  r = test::run_command(apply("3", empty));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(fs::exists(empty + "/CACHEDIR.TAG"));
  EXPECT_EQ(nlohmann::json::parse(test::run_command(tool(empty) + " cache stats --json").out)["entries"], 1);
}

TEST_F(CacheRobustness, ClearAndEvictionRemoveOnlyTheCachesOwnFiles) {
  ASSERT_EQ(test::run_command(apply("1", cache())).exit_code, 0);
  const std::vector<std::string> user_files = {cache() + "/kernels/notes.txt", cache() + "/kernels/ABCDEF0123456789.so",
                                               cache() + "/runtime/readme", cache() + "/tmp/keep-me",
                                               cache() + "/tmp/my-build/out.o", cache() + "/locks/mine.txt"};
  fs::create_directories(cache() + "/tmp/my-build");
  for (const std::string& f : user_files) test::write_text(f, "the user's"), make_old(f);
  make_old(cache() + "/tmp/my-build");
  // A work directory a crashed compile left: the cache's own.
  fs::create_directory(cache() + "/tmp/build-Ab12Cd");
  make_old(cache() + "/tmp/build-Ab12Cd");
  // A compile (another spec) evicts; then clear.
  test::write_text(dir_ + "/spec2.yaml", "name: other\nhead_dim: 32\n");
  ASSERT_EQ(test::run_command(tool(cache()) + " apply " + dir_ + "/spec2.yaml --q " + dir_ + "/q.npy --out-q " + dir_ + "/o2.npy").exit_code, 0);
  EXPECT_FALSE(fs::exists(cache() + "/tmp/build-Ab12Cd"));
  const test::CommandResult r = test::run_command(tool(cache()) + " cache clear");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("removed 2 entries"));
  for (const std::string& f : user_files) EXPECT_EQ(test::read_text(f), "the user's") << f;
  EXPECT_EQ(std::distance(fs::directory_iterator(cache() + "/kernels"), fs::directory_iterator{}), 2);  // the user's two
}

TEST_F(CacheRobustness, AFifoInTheCacheBlocksNothing) {
  const std::string want = jit_outputs();
  const std::vector<std::pair<std::string, std::function<std::string(const std::string&)>>> places = {
      {"entry", [](const std::string& c) { return only_file(c + "/kernels"); }},
      {"runtime object", [](const std::string& c) { return only_file(c + "/runtime"); }},
      {"stats", [](const std::string& c) { return c + "/stats"; }},
      {"marker", [](const std::string& c) { return c + "/CACHEDIR.TAG"; }},
      {"stats lock", [](const std::string& c) { return c + "/locks/stats.lock"; }},
      {"key lock", [](const std::string& c) {
         for (const auto& f : fs::directory_iterator(c + "/locks"))
           if (f.path().filename().string().rfind("key-", 0) == 0) return f.path().string();
         return c + "/locks/none";
       }},
  };
  // One cache with a compiled entry, copied for each place (the copy keeps
  // rope-gen's marker, so it is adopted as the original is): one compile,
  // not one per place.
  const std::string seed = dir_ + "/seed";
  ASSERT_EQ(test::run_command(apply("0", seed)).exit_code, 0);
  int n = 0;
  for (const auto& [what, place] : places) {
    SCOPED_TRACE(what);
    const std::string cache_dir = dir_ + "/cache" + std::to_string(n++);
    fs::copy(seed, cache_dir, fs::copy_options::recursive);
    const std::string path = place(cache_dir);
    fs::remove(path);
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
    if (what != "entry" && what != "key lock") fs::remove(only_file(cache_dir + "/kernels"));  // so the compile path runs
    // `timeout` ends a blocked process with 124.
    test::CommandResult r = test::run_command("timeout 60 env " + apply("1", cache_dir));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(outputs("1") == want);
    for (const char* command : {" cache stats", " cache list", " cache clear"}) {
      r = test::run_command("timeout 60 env " + tool(cache_dir) + command);
      EXPECT_NE(r.exit_code, 124) << command;
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << command << ": " << r.err;
    }
    EXPECT_TRUE(fs::exists(path));  // not rope-gen's to remove
  }
}

TEST_F(CacheRobustness, AStoppedProcessHoldingALockDelaysOthersOnlyBriefly) {
  const RopeSpec spec = parse_spec("name: locked\nhead_dim: 16\n", "test").value();
  lowering::KernelVariant variant;
  variant.position_type = IdType::Int32;
  const runtime::CacheKey key = runtime::cache_key(spec, variant, Halide::get_host_target());
  ASSERT_TRUE(runtime::DiskCache::open(cache(), 1 << 30).ok());
  // A child takes the key's lock and the stats lock, then stops.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    for (const std::string& name : {"key-" + key.hex.substr(0, 2), std::string("stats")}) {
      const int fd = ::open((cache() + "/locks/" + name + ".lock").c_str(), O_RDWR | O_CREAT, 0600);
      if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
    }
    (void)!::write(ready[1], "x", 1);
    ::raise(SIGSTOP);
    ::_exit(0);
  }
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  const auto start = std::chrono::steady_clock::now();
  CacheCounters c;
  {
    RuntimeOptions options{cache(), uint64_t{1} << 30};
    options.lock_wait = std::chrono::milliseconds(300);
    Runtime r(options);
    EXPECT_TRUE(r.get(spec, variant).ok());
    c = r.counters();
  }  // the destructor's stats update waits a bounded time too
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ::close(ready[0]), ::close(ready[1]);
  EXPECT_LT(took, 20.0);
  EXPECT_EQ(c.jit_fallbacks, 1u);
  EXPECT_EQ(c.refused, 1u);
  EXPECT_THAT(c.last_fallback, HasSubstr("another process has held the lock"));
  std::printf("[ INFO     ] with a stopped lock holder: %.2f s\n", took);
}

// A tmpfs of `bytes` mounted at `dir` while it lives.
class SmallFileSystem {
 public:
  SmallFileSystem(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    why_ = std::strerror(errno);
  }
  ~SmallFileSystem() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }

 private:
  std::string dir_, why_;
  bool mounted_ = false;
};

// Fills the file system of `dir` but for about `leave` bytes.
void fill(const std::string& dir, uint64_t leave) {
  const int fd = ::open((dir + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const std::string block(4096, 'f');
  struct stat st;
  while (::fstat(fd, &st) == 0) {
    const fs::space_info space = fs::space(dir);
    if (space.available <= leave || ::write(fd, block.data(), block.size()) <= 0) break;
  }
  ::close(fd);
}

TEST_F(CacheRobustness, AFullFileSystemIsAFallbackToJitNotACrash) {
  const std::string want = jit_outputs();
  const std::string mount_point = dir_ + "/small";
  SmallFileSystem small(mount_point, "1m");
  if (!small.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (" << small.why() << "): needs root";
  const std::string cache_dir = mount_point + "/cache";
  ASSERT_TRUE(runtime::DiskCache::open(cache_dir, 1 << 30).ok());
  // Full, then with room for Halide's runtime object but not the kernel, then some more.
  int n = 0;
  for (uint64_t leave : {0, 200 << 10, 300 << 10}) {
    SCOPED_TRACE(leave);
    fs::remove(mount_point + "/filler");
    fill(mount_point, leave);
    const std::string tag = std::to_string(n++);
    const test::CommandResult r = test::run_command(apply(tag, cache_dir));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("LLVM ERROR")));
    EXPECT_TRUE(outputs(tag) == want);
  }
  fs::remove(mount_point + "/filler");
  fill(mount_point, 0);
  Runtime r(RuntimeOptions{cache_dir, uint64_t{1} << 30});
  const RopeSpec spec = parse_spec("name: full_disk\nhead_dim: 16\n", "test").value();
  EXPECT_TRUE(r.get(spec, lowering::KernelVariant{}).ok());
  EXPECT_EQ(r.counters().jit_fallbacks, 1u);
  EXPECT_THAT(r.counters().last_fallback, HasSubstr("No space left on device"));
}

TEST_F(CacheRobustness, ARefusalIsOneWarningAndShowsInStats) {
  ASSERT_EQ(test::run_command(apply("1", cache())).exit_code, 0);
  const std::string entry = only_file(cache() + "/kernels");
  fs::permissions(entry, fs::perms(0666));
  test::CommandResult r = test::run_command(apply("2", cache()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(outputs("1") == outputs("2"));
  EXPECT_EQ(r.err, "rope-gen: kernel cache: warning: " + entry +
                       " is writable by others (mode 0666); compiling in memory instead\n");
  r = test::run_command(tool(cache()) + " cache stats");
  EXPECT_THAT(r.out, HasSubstr("refused  1 "));
  EXPECT_THAT(r.out, HasSubstr("last JIT fallback: " + entry + " is writable by others"));
  const nlohmann::json s = stats();
  EXPECT_EQ(s["refused"], 1);
  EXPECT_EQ(s["jit_fallbacks"], 1);
  EXPECT_TRUE(fs::exists(entry));
}

}  // namespace
}  // namespace ropegen
