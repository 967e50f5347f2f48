// `rope-gen from-hf --vision` -> `rope-gen apply` for every vision tower it
// converts, against HF's own vision rotary module and apply function rerun in
// float64 at the (h, w) ids of a small patch grid
// (tests/golden/data/hf_vision/<model_type>.json, written by
// tests/golden/hf_vision_cases.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "atomic_file.h"
#include "npy.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

using json = nlohmann::json;
const std::string kTool = ropegen::test::rope_gen_binary();
const std::string kGolden = ropegen::test::source_path("/tests/golden/data/hf_vision/");

json load(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// The multimodal model_type of every tower from-hf --vision converts (hf/hf_vision.json).
std::vector<std::string> tower_model_types() {
  const json table = load(ropegen::test::source_path("/hf/hf_vision.json"));
  std::vector<std::string> out;
  for (auto& [type, t] : table.at("towers").items()) out.push_back(t.at("model_type").get<std::string>());
  return out;
}

class HfVision : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(HfVision, FromHfVisionThenApplyMatchesHfsOwnCode) {
  const json golden = load(kGolden + GetParam() + ".json");
  test::write_text(dir_ + "/config.json", golden.at("config").dump());
  const auto spec = test::run_command(kTool + " from-hf --vision " + dir_ + "/config.json");
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  test::write_text(dir_ + "/spec.yaml", spec.out);
  const auto ids = golden.at("ids").get<std::vector<std::vector<int64_t>>>();
  std::vector<int64_t> flat;
  for (const auto& id : ids) flat.insert(flat.end(), id.begin(), id.end());
  const auto S = static_cast<int64_t>(ids.size()), D = golden.at("head_dim").get<int64_t>();
  cli::write_file_atomically(dir_ + "/p.npy", cli::npy_bytes(flat, {1, S, 2}));
  cli::write_file_atomically(dir_ + "/q.npy", cli::npy_bytes(golden.at("q").get<std::vector<float>>(), {1, S, 1, D}));
  const auto r = test::run_command(kTool + " apply " + dir_ + "/spec.yaml --q " + dir_ + "/q.npy --positions " + dir_ +
                                   "/p.npy --out-q " + dir_ + "/o.npy");
  ASSERT_EQ(r.exit_code, 0) << r.err << spec.out;
  const cli::NpyArray out = cli::read_npy(dir_ + "/o.npy");
  std::vector<float> got(out.elements());
  std::memcpy(got.data(), out.data.data(), out.data.size());
  const auto want = golden.at("out_q").get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  // 2 x HF's own float32 error + 1e-5 x max|q| (computed by the generator).
  EXPECT_LE(worst, golden.at("tolerance").get<double>()) << spec.out;
}

INSTANTIATE_TEST_SUITE_P(Towers, HfVision, ::testing::ValuesIn(tower_model_types()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(HfVisionCases, EveryTowerHasItsGoldenCase) {
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(kGolden)) files += f.path().extension() == ".json";
  EXPECT_EQ(tower_model_types(), (std::vector<std::string>{"llama4", "mistral3", "qwen2_5_vl", "qwen2_vl",
                                                           "qwen3_vl_moe", "qwen3_vl"}));
  EXPECT_EQ(files, tower_model_types().size());
}

}  // namespace
}  // namespace ropegen
