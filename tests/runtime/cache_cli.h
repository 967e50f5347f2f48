// The fixture of the cache tests that run `rope-gen` as users do: a spec
// (partial rotary with k: both of a kernel's pipelines are in play), its
// inputs, and the commands on a cache directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "atomic_file.h"
#include "npy.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen::test {

class CacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    spec_ = dir_ + "/spec.yaml";
    // Partial rotary with k: both of a kernel's pipelines are in play.
    write_text(spec_, "name: neox_like\nhead_dim: 32\nrotary_dim: 8\npairing: half\ndtype: bf16\n");
    std::mt19937 rng(3);
    std::normal_distribution<float> dist;
    std::vector<float> q(2 * 7 * 4 * 32), k(2 * 7 * 2 * 32);
    for (float& v : q) v = dist(rng);
    for (float& v : k) v = dist(rng);
    cli::write_file_atomically(dir_ + "/q.npy", cli::npy_bytes(q, {2, 7, 4, 32}));
    cli::write_file_atomically(dir_ + "/k.npy", cli::npy_bytes(k, {2, 7, 2, 32}));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string env(const std::string& cache) const { return "ROPEGEN_CACHE_DIR=" + cache + " "; }
  std::string cache() const { return dir_ + "/cache"; }
  // `rope-gen apply` writing o<tag>q.npy and o<tag>k.npy; the shell command only.
  std::string apply(const std::string& tag, const std::string& cache_dir) const {
    return env(cache_dir) + ropegen::test::rope_gen_binary() + " apply " + spec_ + " --q " + dir_ + "/q.npy --k " +
           dir_ + "/k.npy --out-q " + dir_ + "/o" + tag + "q.npy --out-k " + dir_ + "/o" + tag + "k.npy";
  }
  std::string outputs(const std::string& tag) const {
    return read_text(dir_ + "/o" + tag + "q.npy") + read_text(dir_ + "/o" + tag + "k.npy");
  }
  nlohmann::json stats() const {
    const CommandResult r = run_command(env(cache()) + ropegen::test::rope_gen_binary() + " cache stats --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
  // What a JIT kernel (no usable cache: the directory is a file) writes.
  std::string jit_outputs() {
    write_text(dir_ + "/not-a-dir", "");
    const CommandResult r = run_command(apply("jit", dir_ + "/not-a-dir"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return outputs("jit");
  }
  std::string dir_, spec_;
};

}  // namespace ropegen::test
