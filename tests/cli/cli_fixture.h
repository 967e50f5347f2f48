// A temp directory per test and the CLI run in it, for the tests that feed
// rope-gen hostile inputs and outputs (hostile_*_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "atomic_file.h"
#include "npy.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen::test {

class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string spec(const std::string& name, const std::string& text) {
    write_text(path(name), text);
    return path(name);
  }
  std::string floats(const std::string& name, const std::vector<int64_t>& shape, float value = 0.5f) {
    cli::write_file_atomically(path(name), cli::npy_bytes(std::vector<float>(count(shape), value), shape));
    return path(name);
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& values, const std::vector<int64_t>& shape) {
    cli::write_file_atomically(path(name), cli::npy_bytes(values, shape));
    return path(name);
  }
  // rope-gen with these arguments; `timeout` so a hang fails the test.
  static CommandResult rope_gen(const std::string& args) {
    return run_command("timeout 300 " + ropegen::test::rope_gen_binary() + " " + args);
  }
  static int64_t count(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return n;
  }
  std::string dir_;
};

}  // namespace ropegen::test
