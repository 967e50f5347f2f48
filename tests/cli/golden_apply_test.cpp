// Every committed peer golden case through `rope-gen apply`, as users call
// it, on the host and on Vulkan: the CLI's output matches the peer's own.
#include <gtest/gtest.h>

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

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

std::vector<float> read_floats(const std::string& path) {
  const cli::NpyArray a = cli::read_npy(path);
  std::vector<float> out(a.elements());
  std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

// Every case on `target`; returns how many ran (0: the target cannot run
// here, `skip_reason` says why).
int check_every_peer_case(const std::string& target, std::string* skip_reason) {
  const std::string dir = test::make_temp_dir();
  int checked = 0;
  std::vector<test::GoldenCase> cases;
  for (const test::GoldenCase& c : test::load_golden_cases()) {
    if (!c.has_tensors()) continue;
    if (parse_spec(c.spec, c.name).ok()) cases.push_back(c);
    else std::printf("[ SKIPPED  ] %s: spec v1 cannot express it yet\n", c.name.c_str());
  }
  for (const test::GoldenCase& c : test::sweep_subset(cases)) {
    SCOPED_TRACE(c.name + " (" + c.peer + ")");
    test::write_text(dir + "/spec.yaml", c.spec);
    cli::write_file_atomically(dir + "/q.npy", cli::npy_bytes(to_float(c.q->data), c.q->shape));
    std::string args = " --q " + dir + "/q.npy --out-q " + dir + "/oq.npy";
    if (c.k) {
      cli::write_file_atomically(dir + "/k.npy", cli::npy_bytes(to_float(c.k->data), c.k->shape));
      args += " --k " + dir + "/k.npy --out-k " + dir + "/ok.npy";
    }
    if (c.positions) {
      std::vector<int64_t> ids(c.positions->data.begin(), c.positions->data.end());
      cli::write_file_atomically(dir + "/p.npy", cli::npy_bytes(ids, c.positions->shape));
      args += " --positions " + dir + "/p.npy";
    }
    if (c.offset) args += " --offset " + std::to_string(c.offset);
    if (c.seq_len) args += " --seq-len " + std::to_string(*c.seq_len);
    const test::CommandResult r = test::run_command(ropegen::test::rope_gen_binary() + " apply " + dir + "/spec.yaml" +
                                                    args + " --target " + target);
    if (r.exit_code == 2 && r.err.find("cannot run on this machine") != std::string::npos) {
      *skip_reason = r.err;
      break;
    }
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) continue;

    auto compare = [&](const std::string& file, const test::GoldenTensor& want) {
      const std::vector<float> got = read_floats(file);
      ASSERT_EQ(got.size(), want.data.size());
      double max_abs = 0, worst = 0;
      for (double v : want.data) max_abs = std::max(max_abs, std::abs(v));
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want.data[i]));
      // The peers' float32 angles drift with the position; ours do not.
      EXPECT_LE(worst, (4e-6 + 2e-7 * static_cast<double>(c.max_position())) * std::max(1.0, max_abs)) << file;
    };
    compare(dir + "/oq.npy", *c.out_q);
    if (c.k) compare(dir + "/ok.npy", *c.out_k);
    ++checked;
  }
  std::filesystem::remove_all(dir);
  return checked;
}

TEST(GoldenApply, EveryPeerCaseThroughTheCli) {
  std::string skip;
  EXPECT_GE(check_every_peer_case("host", &skip), test::sweep_count(30)) << skip;
}

// The same cases on Vulkan (lavapipe in CI): the GPU kernels meet the
// peers' own outputs exactly as the CPU's do.
TEST(GoldenApply, EveryPeerCaseOnVulkan) {
  std::string skip;
  const int checked = check_every_peer_case("vulkan", &skip);
  if (checked == 0 && !skip.empty()) GTEST_SKIP() << "no Vulkan device: " << skip;
  EXPECT_GE(checked, test::sweep_count(30));
}

}  // namespace
}  // namespace ropegen
