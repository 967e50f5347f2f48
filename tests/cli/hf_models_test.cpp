// Every model type of the generated model table (hf/hf_models.json)
// through `rope-gen from-hf` -> `rope-gen apply`, against HF's own rotary
// module and apply function rerun in float64 on the same tiny config
// (tests/golden/data/hf_models/<model_type>.json, written by
// tests/golden/hf_model_table.py). A refused model type must be refused.
#include "hf_models.h"

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
const std::string kGolden = ropegen::test::source_path("/tests/golden/data/hf_models/");

json load(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

bool refused(const std::string& type) {
  const json* entry = hf::hf_model(type);
  return !entry || entry->contains("refused") || entry->contains("unsupported");
}

// The model types with a pairing, or those from-hf refuses: refused, and
// without a text model of their own that has a pairing.
std::vector<std::string> table_types(bool refusing) {
  std::vector<std::string> out;
  for (auto& [type, entry] : hf::hf_models().at("models").items()) {
    const bool text_ok = entry.contains("text_model_type") && !refused(entry.at("text_model_type"));
    if (refusing ? refused(type) && !text_ok : !refused(type)) out.push_back(type);
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

class HfModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// `apply SPEC` (with --backward: the rotation by -angle) on q [1, S, 1, D] at explicit ids; the output.
std::vector<float> apply(const std::string& dir, const std::vector<float>& q, int64_t d, const json& golden,
                         bool backward) {
  const auto positions = golden.at("positions").get<std::vector<int64_t>>();
  const int64_t S = static_cast<int64_t>(positions.size());
  cli::write_file_atomically(dir + "/q.npy", cli::npy_bytes(q, {1, S, 1, d}));  // B = H = 1: bhsd = bshd
  // M-RoPE: one id per axis, (t, h, w) differing as an image's tokens do.
  std::vector<int64_t> ids, shape = {1, S};
  if (golden.contains("axis_positions")) {
    for (const json& per_token : golden.at("axis_positions"))
      for (const json& id : per_token) ids.push_back(id.get<int64_t>());
    shape.push_back(static_cast<int64_t>(golden.at("axis_positions").at(0).size()));
  } else {
    ids = positions;
  }
  cli::write_file_atomically(dir + "/p.npy", cli::npy_bytes(ids, shape));
  const auto r = test::run_command(kTool + " apply " + dir + "/spec.yaml --q " + dir + "/q.npy --positions " + dir +
                                   "/p.npy --out-q " + dir + "/o.npy" + (backward ? " --backward" : ""));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  const cli::NpyArray out = cli::read_npy(dir + "/o.npy");
  std::vector<float> got(out.elements());
  std::memcpy(got.data(), out.data.data(), out.data.size());
  return got;
}

// 2 x HF's own float32 error + 1e-5 x max|q| (computed by the generator).
void expect_close(const std::vector<float>& got, const json& want_json, const json& c, const std::string& text) {
  const auto want = want_json.get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LE(worst, c.at("tolerance").get<double>()) << text;
}

// One golden case: `from-hf CONFIG [--layer-type T]` -> `apply` on the case's
// q and explicit positions, against HF's float64 rerun; where HF also rotates
// back (DeepSeek-V4's attention output), `apply --backward` against that.
void expect_matches_hf(const json& golden, const std::string& config, const std::string& dir) {
  for (const json& c : golden.at("cases")) {
    const std::string layer = c.at("layer_type").is_null() ? "" : c.at("layer_type").get<std::string>();
    SCOPED_TRACE(config + (layer.empty() ? "" : " --layer-type " + layer));
    // One name for every model: equal specs share their cached kernel.
    const auto spec = test::run_command(kTool + " from-hf " + config + " --name m" +
                                        (layer.empty() ? "" : " --layer-type " + layer));
    ASSERT_EQ(spec.exit_code, 0) << spec.err;
    // HF ran float32 at explicit ids; the config's dtype and the implicit default are deployment choices.
    std::string text = spec.out;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"\npositions: implicit", "\npositions: explicit"},
                                   {"\ndtype: bf16", "\ndtype: f32"}, {"\ndtype: f16", "\ndtype: f32"}}) {
      if (const size_t at = text.find(from); at != std::string::npos) text.replace(at, from.size(), to);
    }
    test::write_text(dir + "/spec.yaml", text);
    // Layer types whose heads differ (Gemma 4) have a q each.
    const json& q = c.contains("q") ? c.at("q") : golden.at("q");
    const int64_t d = (c.contains("head_dim") ? c : golden).at("head_dim").get<int64_t>();
    expect_close(apply(dir, q.get<std::vector<float>>(), d, golden, false), c.at("out_q"), c, text);
    if (c.contains("out_q_inverse"))
      expect_close(apply(dir, q.get<std::vector<float>>(), d, golden, true), c.at("out_q_inverse"), c, text);
  }
}

TEST_P(HfModel, FromHfThenApplyMatchesHfsOwnCode) {
  const json golden = load(kGolden + GetParam() + ".json");
  test::write_text(dir_ + "/config.json", golden.at("config").dump());
  expect_matches_hf(golden, dir_ + "/config.json", dir_);
}

INSTANTIATE_TEST_SUITE_P(Table, HfModel, ::testing::ValuesIn(table_types(false)), case_name);

// A refused model type exits 2 with the table's reason and the flag that decides it; one whose RoPE the spec
// cannot express (a learned frequency scale) with what a spec would need, and no flag changes that.
class HfRefused : public HfModel {};

TEST_P(HfRefused, ExitsTwoNamingThePairingFlagOrTheConstruct) {
  test::write_text(dir_ + "/config.json", json{{"model_type", GetParam()}, {"hidden_size", 64},
                                               {"num_attention_heads", 4}}.dump());
  const bool unsupported = hf::hf_model(GetParam())->contains("unsupported");
  for (const std::string flag : {"", " --pairing half"}) {
    if (!unsupported && !flag.empty()) continue;
    const auto r = test::run_command(kTool + " from-hf " + dir_ + "/config.json" + flag);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(unsupported ? "a spec cannot express the RoPE of transformers"
                                     : "pairing half or pairing interleaved"),
              std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

INSTANTIATE_TEST_SUITE_P(Table, HfRefused, ::testing::ValuesIn(table_types(true)), case_name);

// The real config.json files (tests/golden/hf_configs, examples/hf_configs)
// as they are, 4.x keys and all, on one full-size head.
std::vector<std::string> real_cases() {
  std::vector<std::string> out;
  for (const auto& f : std::filesystem::directory_iterator(kGolden + "real")) out.push_back(f.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

class HfRealConfig : public HfModel {};

TEST_P(HfRealConfig, FromHfThenApplyMatchesHfsOwnCode) {
  const json golden = load(kGolden + "real/" + GetParam() + ".json");
  expect_matches_hf(golden, ropegen::test::source_path("/") + golden.at("config_file").get<std::string>(), dir_);
}

INSTANTIATE_TEST_SUITE_P(Real, HfRealConfig, ::testing::ValuesIn(real_cases()), case_name);

TEST(HfModelTable, EveryModelTypeWithAPairingHasItsGoldenCase) {
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(kGolden)) files += f.path().extension() == ".json";
  EXPECT_EQ(real_cases().size(), 28u);
  EXPECT_EQ(files, table_types(false).size());
  EXPECT_EQ(hf::hf_models().at("transformers"), "5.24.0");
}

}  // namespace
}  // namespace ropegen
