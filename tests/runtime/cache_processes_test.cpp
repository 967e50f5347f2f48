// The kernel cache across processes, through `rope-gen apply` and `rope-gen
// cache` exactly as users run them: a second apply loads instead of
// compiling, four processes racing on an empty cache leave one entry and
// agree, a damaged entry never crashes a run, and the cache commands.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/cache_cli.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using CacheProcesses = test::CacheCli;

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

// The key hashes the sources, not the binary: a kernel the rope-gen program
// compiled is loaded by this test program (another binary of the same
// sources), as by the Python module and a sanitizer build.
TEST_F(CacheProcesses, AnotherProgramOfTheSameSourcesLoadsTheKernel) {
  ASSERT_EQ(test::run_command(apply("1", cache())).exit_code, 0);
  Result<RopeSpec> spec = parse_spec(test::read_text(spec_), spec_);
  ASSERT_TRUE(spec) << format(spec.errors());
  RuntimeOptions options;
  options.cache_dir = cache();
  Runtime runtime(options);
  KernelVariant variant;
  variant.with_k = true;
  ASSERT_TRUE(runtime.get(*spec, variant));
  EXPECT_EQ(runtime.counters().disk_hits, 1u);
  EXPECT_EQ(runtime.counters().compiles, 0u);
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
  const std::string tool = env(cache()) + ropegen::test::rope_gen_binary();
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
  r = test::run_command(env(dir_ + "/none") + ropegen::test::rope_gen_binary() + " cache list --json");
  EXPECT_EQ(r.out, "[]\n");
  EXPECT_FALSE(fs::exists(dir_ + "/none"));
  r = test::run_command("ROPEGEN_CACHE_MAX_BYTES=lots " + tool + " cache stats");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("ROPEGEN_CACHE_MAX_BYTES=lots"));
}

}  // namespace
}  // namespace ropegen
