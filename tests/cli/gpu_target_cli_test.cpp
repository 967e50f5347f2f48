// `rope-gen apply` and `bench` on GPU targets, as users call them: a target
// that cannot run here is exit 2 and a sentence naming the target and what
// is missing (never a crash or a hang); one that runs gives the host's bits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "atomic_file.h"
#include "npy.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;

const std::string kTool = ropegen::test::rope_gen_binary();
const std::string kSpec = ropegen::test::source_path("/examples/llama3_8b.yaml");

class GpuTargetCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir();
    std::vector<float> q(2 * 5 * 3 * 128);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 61) * 0.03f - 0.9f;
    cli::write_file_atomically(path("q.npy"), cli::npy_bytes(q, {2, 5, 3, 128}));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  test::CommandResult apply(const std::string& target, const std::string& env = "") {
    return test::run_command(env + " " + kTool + " apply " + kSpec + " --q " + path("q.npy") + " --out-q " +
                             path("out_" + target + ".npy") + " --target " + target);
  }
  std::string dir_;
};

TEST_F(GpuTargetCli, CudaWithoutDeviceExitsTwoNamingTheTarget) {
  const test::CommandResult r = apply("cuda");
  if (r.exit_code == 0) GTEST_SKIP() << "a CUDA device is present: the message for a missing one is not reachable";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("target `cuda` cannot run on this machine"));
  EXPECT_THAT(r.err, HasSubstr("CUDA"));
  EXPECT_FALSE(std::filesystem::exists(path("out_cuda.npy")));
  // Bench says the same.
  const test::CommandResult b = test::run_command(kTool + " bench " + kSpec + " --shape 1,8,2 --target cuda");
  EXPECT_EQ(b.exit_code, 2) << b.err;
  EXPECT_THAT(b.err, HasSubstr("target `cuda` cannot run on this machine"));
}

TEST_F(GpuTargetCli, VulkanWithoutDriverExitsTwoNamingTheTarget) {
  // The loader finds no driver (ICD) at all.
  const test::CommandResult r = apply("vulkan", "VK_ICD_FILENAMES=/nonexistent VK_DRIVER_FILES=/nonexistent");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("target `vulkan` cannot run on this machine"));
  EXPECT_THAT(r.err, HasSubstr("Vulkan"));
  EXPECT_FALSE(std::filesystem::exists(path("out_vulkan.npy")));
}

TEST_F(GpuTargetCli, GpuApisWithoutSchedulesAreRejected) {
  const test::CommandResult r = apply("host-metal");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cuda and vulkan only"));
}

TEST_F(GpuTargetCli, VulkanGivesTheHostsBits) {
  const test::CommandResult host = apply("host");
  ASSERT_EQ(host.exit_code, 0) << host.err;
  for (const std::string target : {"vulkan", "host-vulkan-vk_float64"}) {
    const test::CommandResult r = apply(target);
    if (r.exit_code == 2 && r.err.find("cannot run on this machine") != std::string::npos)
      GTEST_SKIP() << "no Vulkan device: " << r.err;
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const cli::NpyArray a = cli::read_npy(path("out_host.npy")), b = cli::read_npy(path("out_" + target + ".npy"));
    ASSERT_EQ(a.data.size(), b.data.size());
    EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size()), 0) << target << " differs from the host";
  }
}

// A GPU library still needs a CPU target (the host side of its kernels);
// a build that fails leaves no directory behind.
TEST_F(GpuTargetCli, AotGpuLibrariesNeedACpuTarget) {
  const test::CommandResult r = test::run_command(kTool + " build " + kSpec + " --targets vulkan -o " + path("lib"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("has no CPU target"));
  EXPECT_FALSE(std::filesystem::exists(path("lib")));
}

}  // namespace
}  // namespace ropegen
