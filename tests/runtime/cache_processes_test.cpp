// The kernel cache across processes, through `rope-gen apply` and `rope-gen
// cache` exactly as users run them: a second apply loads instead of
// compiling, four processes racing on an empty cache leave one entry and
// agree, a damaged entry never crashes a run, and the cache commands.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "npy.h"
#include "support/run_command.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CacheProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir();
    spec_ = dir_ + "/spec.yaml";
    // Partial rotary with k: both of a kernel's pipelines are in play.
    test::write_text(spec_, "name: neox_like\nhead_dim: 32\nrotary_dim: 8\npairing: half\ndtype: bf16\n");
    std::mt19937 rng(3);
    std::normal_distribution<float> dist;
    std::vector<float> q(2 * 7 * 4 * 32), k(2 * 7 * 2 * 32);
    for (float& v : q) v = dist(rng);
    for (float& v : k) v = dist(rng);
    cli::write_file_atomically(dir_ + "/q.npy", cli::npy_bytes(q, {2, 7, 4, 32}));
    cli::write_file_atomically(dir_ + "/k.npy", cli::npy_bytes(k, {2, 7, 2, 32}));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string env(const std::string& cache) const { return "ROPEGEN_CACHE_DIR=" + cache + " "; }
  std::string cache() const { return dir_ + "/cache"; }
  // `rope-gen apply` writing o<tag>q.npy and o<tag>k.npy; the shell command only.
  std::string apply(const std::string& tag, const std::string& cache_dir) const {
    return env(cache_dir) + ROPEGEN_BINARY + " apply " + spec_ + " --q " + dir_ + "/q.npy --k " + dir_ +
           "/k.npy --out-q " + dir_ + "/o" + tag + "q.npy --out-k " + dir_ + "/o" + tag + "k.npy";
  }
  std::string outputs(const std::string& tag) const {
    return test::read_text(dir_ + "/o" + tag + "q.npy") + test::read_text(dir_ + "/o" + tag + "k.npy");
  }
  nlohmann::json stats() const {
    const test::CommandResult r = test::run_command(env(cache()) + ROPEGEN_BINARY + " cache stats --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
  // What a JIT kernel (no usable cache: the directory is a file) writes.
  std::string jit_outputs() {
    test::write_text(dir_ + "/not-a-dir", "");
    const test::CommandResult r = test::run_command(apply("jit", dir_ + "/not-a-dir"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return outputs("jit");
  }
  std::string dir_, spec_;
};

double run_timed(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  const test::CommandResult r = test::run_command(command);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_F(CacheProcesses, ASecondApplyLoadsTheKernelInsteadOfCompiling) {
  const double cold = run_timed(apply("1", cache()));
  nlohmann::json s = stats();
  EXPECT_EQ(s["compile"]["count"], 1);
  EXPECT_EQ(s["disk"]["hits"], 0);
  const double warm = run_timed(apply("2", cache()));
  s = stats();
  EXPECT_EQ(s["compile"]["count"], 1);  // not compiled again
  EXPECT_EQ(s["disk"]["hits"], 1);
  EXPECT_EQ(s["entries"], 1);
  EXPECT_EQ(outputs("1"), outputs("2"));
  EXPECT_EQ(outputs("1"), jit_outputs());
  std::printf("[ INFO     ] apply: cold %.3f s, warm %.3f s (whole process)\n", cold, warm);
}

TEST_F(CacheProcesses, FourProcessesOnAnEmptyCacheLeaveOneEntryAndAgree) {
  std::string all;
  for (int i = 0; i < 4; ++i) all += "(" + apply(std::to_string(i), cache()) + " || echo FAILED " + std::to_string(i) + ") & ";
  const test::CommandResult r = test::run_command("{ " + all + "wait; }");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("FAILED"))) << r.err;
  EXPECT_EQ(std::distance(fs::directory_iterator(cache() + "/kernels"), fs::directory_iterator{}), 1);
  const std::string want = jit_outputs();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(outputs(std::to_string(i)), want) << "process " << i;
  const nlohmann::json s = stats();
  EXPECT_EQ(s["compile"]["count"], 1);  // the others waited on the key's lock, then loaded
  EXPECT_EQ(s["disk"]["hits"], 3);
  EXPECT_EQ(s["evicted"]["damaged"], 0);
  EXPECT_EQ(s["jit_fallbacks"], 0);
}

TEST_F(CacheProcesses, ADamagedEntryIsRebuiltNotLoaded) {
  ASSERT_EQ(test::run_command(apply("1", cache())).exit_code, 0);
  const fs::path entry = fs::directory_iterator(cache() + "/kernels")->path();
  std::string bytes = test::read_text(entry.string());
  for (size_t i = 64; i < bytes.size(); i += 997) bytes[i] ^= 0x5a;  // damage all over, ELF headers included
  test::write_text(entry.string(), bytes);
  const test::CommandResult r = test::run_command(apply("2", cache()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(outputs("1"), outputs("2"));
  const nlohmann::json s = stats();
  EXPECT_EQ(s["evicted"]["damaged"], 1);
  EXPECT_EQ(s["compile"]["count"], 2);
}

TEST_F(CacheProcesses, ListStatsAndClear) {
  const std::string tool = env(cache()) + ROPEGEN_BINARY;
  ASSERT_EQ(test::run_command(apply("1", cache())).exit_code, 0);
  test::CommandResult r = test::run_command(tool + " cache list --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json list = nlohmann::json::parse(r.out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "neox_like");
  EXPECT_EQ(list[0]["variant"], "qk");
  EXPECT_EQ(list[0]["key"].get<std::string>().size(), 16u);
  r = test::run_command(tool + " cache list");
  EXPECT_THAT(r.out, HasSubstr("neox_like"));
  EXPECT_THAT(r.out, HasSubstr("1 entries in " + cache()));
  r = test::run_command(tool + " cache stats");
  EXPECT_THAT(r.out, HasSubstr("compile  1 kernels"));
  r = test::run_command(tool + " cache clear");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("removed 1 entries"));
  EXPECT_EQ(stats()["entries"], 0);
  EXPECT_EQ(stats()["compile"]["count"], 0);
  // A cache that does not exist yet lists as empty and is not created.
  r = test::run_command(env(dir_ + "/none") + ROPEGEN_BINARY + " cache list --json");
  EXPECT_EQ(r.out, "[]\n");
  EXPECT_FALSE(fs::exists(dir_ + "/none"));
  r = test::run_command("ROPEGEN_CACHE_MAX_BYTES=lots " + tool + " cache stats");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("ROPEGEN_CACHE_MAX_BYTES=lots"));
}

}  // namespace
}  // namespace ropegen
