// Every committed encodings golden case (tests/golden/data/encodings: M-RoPE,
// 2D/axial RoPE, run-time frequencies, RoPE backward, tables, sinusoidal,
// learned, ALiBi) through `rope-gen apply|table`, as users call it: each
// input written as .npy and passed by its flag, each output read back and
// compared with the peer's own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "atomic_file.h"
#include "npy.h"
#include "ropegen/spec_io.h"
#include "support/golden.h"
#include "support/run_command.h"
#include "support/sweep_subset.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

// A case's tensor name as a CLI flag: saved_q -> --saved-q.
std::string flag(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return " --" + name;
}

void write_npy(const std::string& path, const test::GoldenTensor& t) {
  if (t.integer) {
    cli::write_file_atomically(path, cli::npy_bytes(std::vector<int64_t>(t.data.begin(), t.data.end()), t.shape));
  } else {
    cli::write_file_atomically(path, cli::npy_bytes(std::vector<float>(t.data.begin(), t.data.end()), t.shape));
  }
}

// The command line of the case: inputs written under `dir`, outputs to be
// written there; kernels (apply) on `target`.
std::string command_line(const test::EncodingCase& c, const std::string& dir, const std::string& target) {
  std::string args =
      ropegen::test::rope_gen_binary() + (c.command == "table" ? " table " : " apply ") + dir + "/spec.yaml";
  if (c.command != "table") args += " --target " + target;
  if (c.command == "backward") args += " --backward";
  for (const auto& [name, t] : c.inputs) {
    write_npy(dir + "/" + name + ".npy", t);
    args += flag(name) + " " + dir + "/" + name + ".npy";
  }
  for (const auto& [name, value] : c.options) args += flag(name) + " " + std::to_string(value);
  for (const auto& [name, t] : c.outputs) args += flag(name) + " " + dir + "/" + name + ".npy";
  return args;
}

void expect_matches(const std::string& file, const test::GoldenTensor& want) {
  const cli::NpyArray a = cli::read_npy(file);
  ASSERT_EQ(a.dtype, "<f4") << file;
  EXPECT_EQ(a.shape, want.shape) << file;
  std::vector<float> got(a.elements());
  std::memcpy(got.data(), a.data.data(), a.data.size());
  ASSERT_EQ(got.size(), want.data.size()) << file;
  double max_abs = 1, worst = 0;
  for (double v : want.data) max_abs = std::max(max_abs, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want.data[i]));
  // The reference meets every case within 2e-7 relative (reference_test);
  // float32 storage and math on our side leave a few ulp more.
  EXPECT_LE(worst, 1e-5 * max_abs) << file;
}

// Runs every case with its kernels on `target`; the cases checked, 0 with
// `skip_reason` set when the target cannot run here.
int check_every_case(const std::string& target, std::string* skip_reason) {
  int checked = 0;
  for (const test::EncodingCase& c : test::sweep_subset(test::load_encoding_cases())) {
    SCOPED_TRACE(c.name + " (" + c.peer + ")");
    const std::string dir = test::make_temp_dir();
    EXPECT_TRUE(parse_spec(c.spec, c.name).ok()) << c.spec;
    test::write_text(dir + "/spec.yaml", c.spec);
    const test::CommandResult r = test::run_command(command_line(c, dir, target));
    if (r.exit_code == 2 && r.err.find("cannot run on this machine") != std::string::npos) {
      *skip_reason = r.err;
      std::filesystem::remove_all(dir);
      return 0;
    }
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code == 0)
      for (const auto& [name, want] : c.outputs) expect_matches(dir + "/" + name + ".npy", want);
    std::filesystem::remove_all(dir);
    ++checked;
  }
  return checked;
}

TEST(GoldenEncodings, EveryCaseThroughTheCli) {
  std::string skip;
  EXPECT_GE(check_every_case("host", &skip), test::sweep_count(40)) << skip;
}

// The same cases with the Vulkan kernels (lavapipe in CI).
TEST(GoldenEncodings, EveryCaseOnVulkan) {
  std::string skip;
  const int checked = check_every_case("vulkan", &skip);
  if (checked == 0 && !skip.empty()) GTEST_SKIP() << "no Vulkan device: " << skip;
  EXPECT_GE(checked, test::sweep_count(40));
}

}  // namespace
}  // namespace ropegen
