// rope-gen explain as users call it: the JSON contract, the text table, the
// kernel's precision (the real JIT kernel), other encodings, exit codes, --plot.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "ropegen/rope_explain.h"
#include "ropegen/spec_io.h"
#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;
using test::run_command;

const std::string kTool = "timeout 300 " + ropegen::test::rope_gen_binary();
const std::string kExamples = ropegen::test::source_path("/examples");

nlohmann::json explain_json(const std::string& args) {
  const test::CommandResult r = run_command(kTool + " explain --json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

std::map<std::string, int> regimes(const nlohmann::json& j) {
  std::map<std::string, int> n;
  for (const auto& p : j["pairs"]) ++n[p["regime"].get<std::string>()];
  return n;
}

// Llama 3.1 8B: every position up to 131072, the real kernel within 2.5e-7 of
// float64; the other columns are the library's own numbers (the same
// computation in this process, without the kernel).
TEST(ExplainCli, Llama3Json) {
  const nlohmann::json j = explain_json(kExamples + "/llama3_8b.yaml");
  EXPECT_EQ(j["name"], "llama3_8b");
  EXPECT_EQ(j["encoding"], "rope");
  EXPECT_EQ(j["rotary_dim"], 128);
  EXPECT_EQ(j["attention_factor"], 1.0);
  EXPECT_EQ(j["attention_factor_source"], "none");
  EXPECT_EQ(j["original_max_position"], 8192);
  ASSERT_EQ(j["pairs"].size(), 64u);
  EXPECT_EQ(regimes(j), (std::map<std::string, int>{{"kept", 29}, {"blended", 6}, {"interpolated", 29}}));
  EXPECT_TRUE(j["pairs"][0]["axis"].is_null());
  EXPECT_EQ(j["pairs"][0]["inv_freq"], 1.0);
  const nlohmann::json& p = j["precision"];
  EXPECT_EQ(p["max_pos"], 131072);
  EXPECT_EQ(p["positions_checked"], 131073);
  EXPECT_EQ(p["sampled"], false);
  ASSERT_TRUE(p["rope_gen"].is_number());
  EXPECT_GT(p["rope_gen"].get<double>(), 0.0);
  EXPECT_LT(p["rope_gen"].get<double>(), 2.5e-7);

  Result<RopeSpec> spec = load_spec(kExamples + "/llama3_8b.yaml");
  ASSERT_TRUE(spec.ok());
  const Result<Explanation> here = explain(*spec);
  ASSERT_TRUE(here.ok());
  EXPECT_EQ(p["f32_angle"].get<double>(), here->precision->max_error.f32_angle);
  EXPECT_EQ(p["bf16_table"].get<double>(), here->precision->max_error.bf16_table);
  EXPECT_EQ(p["f16_table"].get<double>(), here->precision->max_error.f16_table);
  // At 131072 the float32 angle is off by more than the kernel's whole error budget many times over.
  EXPECT_GT(p["f32_angle"].get<double>(), 1e-3);
}

TEST(ExplainCli, Llama3Text) {
  const test::CommandResult r = run_command(kTool + " explain " + kExamples + "/llama3_8b.yaml --max-pos 4096");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("llama3_8b: rope, 64 rotary pairs (rotary_dim 128), llama3 scaling, factor 8, "
                               "original context 8192 (x factor: 65536)\n"));
  EXPECT_THAT(r.out, HasSubstr("attention factor 1 (none)\n"));
  EXPECT_THAT(r.out, HasSubstr("pair  inv_freq"));
  EXPECT_THAT(r.out, HasSubstr("blended, smooth 0."));
  EXPECT_THAT(r.out, HasSubstr("precision up to position 4096 (every position 0..4096)"));
  EXPECT_THAT(r.out, HasSubstr("rope-gen kernel (float32)"));
  const std::regex pair_row(R"(^ *\d+  \d\.\d{6}e[+-]\d\d  )");
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) rows += std::regex_search(line, pair_row);
  EXPECT_EQ(rows, 64);
}

TEST(ExplainCli, YarnLongRopeAndMultiAxis) {
  const nlohmann::json qwen = explain_json(kExamples + "/qwen2_5_7b.yaml --max-pos 1000");
  EXPECT_EQ(regimes(qwen), (std::map<std::string, int>{{"extrapolated", 24}, {"ramp", 16}, {"interpolated", 24}}));
  EXPECT_EQ(qwen["attention_factor_source"], "yarn: 0.1*ln(factor)+1");
  EXPECT_LT(qwen["precision"]["rope_gen"].get<double>(), 2.5e-7 * qwen["attention_factor"].get<double>());

  const nlohmann::json phi_short = explain_json(kExamples + "/phi3_5_mini.yaml --max-pos 1000");
  const nlohmann::json phi_long = explain_json(kExamples + "/phi3_5_mini.yaml --max-pos 1000 --seq-len 8192");
  EXPECT_EQ(regimes(phi_short), (std::map<std::string, int>{{"short", 48}}));
  EXPECT_EQ(regimes(phi_long), (std::map<std::string, int>{{"long", 48}}));
  EXPECT_EQ(phi_long["seq_len"], 8192);
  EXPECT_LT(phi_long["precision"]["rope_gen"].get<double>(), 2.5e-7 * 1.2);

  const nlohmann::json vl = explain_json(kExamples + "/qwen2_vl_7b.yaml --max-pos 1000");
  std::map<int, int> per_axis;
  for (const auto& p : vl["pairs"]) ++per_axis[p["axis"].get<int>()];
  EXPECT_EQ(per_axis, (std::map<int, int>{{0, 16}, {1, 24}, {2, 24}}));
  EXPECT_LT(vl["precision"]["rope_gen"].get<double>(), 2.5e-7);
}

TEST(ExplainCli, OtherEncodings) {
  const nlohmann::json sin = explain_json(kExamples + "/transformer_sinusoidal.yaml --max-pos 5000");
  EXPECT_EQ(sin["encoding"], "sinusoidal");
  ASSERT_FALSE(sin["pairs"].empty());
  EXPECT_TRUE(sin["pairs"][0]["columns"].is_array());
  EXPECT_LT(sin["precision"]["rope_gen"].get<double>(), 2.5e-7);

  const nlohmann::json alibi = explain_json(kExamples + "/bloom_alibi.yaml");
  EXPECT_EQ(alibi["encoding"], "alibi");
  EXPECT_FALSE(alibi["alibi_slopes"].empty());
  EXPECT_TRUE(alibi["precision"].is_null());
  const test::CommandResult text = run_command(kTool + " explain " + kExamples + "/bloom_alibi.yaml");
  EXPECT_THAT(text.out, HasSubstr("head  slope\n   0  "));
}

TEST(ExplainCli, SamplesLongRanges) {
  const nlohmann::json j = explain_json(kExamples + "/llama3_8b.yaml --max-pos 1048576");
  EXPECT_EQ(j["precision"]["sampled"], true);
  EXPECT_LT(j["precision"]["positions_checked"].get<int64_t>(), 1048577);
  EXPECT_EQ(j["precision"]["by_position"].back()["last"], 1048576);
  EXPECT_LT(j["precision"]["rope_gen"].get<double>(), 2.5e-7);
}

class ExplainCliErrors : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ExplainCliErrors, UserMistakesExitTwo) {
  const std::string spec = dir_ + "/bad.yaml";
  test::write_text(spec, "name: a\nhead_dim: 128\nrotary_dim: 130\n");
  test::CommandResult r = run_command(kTool + " explain " + spec);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(spec + ":3:13: error: rotary_dim (130)"));
  r = run_command(kTool + " explain " + dir_ + "/missing.yaml");
  EXPECT_EQ(r.exit_code, 2);
  const std::string llama = kExamples + "/llama3_8b.yaml";
  for (const char* args : {"--max-pos 0", "--max-pos 9007199254740993", "--seq-len 0", "--kind decay",
                                  "--plot x.png --kind pictures", "--max-pos nine"}) {
    r = run_command(kTool + " explain " + llama + " " + std::string(args));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_FALSE(r.err.empty()) << args;
  }
}

// Without python3 (an empty PATH) --plot says how to get the plotting
// package, before any work, and writes nothing.
TEST_F(ExplainCliErrors, PlotWithoutPythonSaysHow) {
  const test::CommandResult r = run_command("PATH=" + dir_ + " " + ropegen::test::rope_gen_binary() + " explain " +
                                            kExamples + "/llama3_8b.yaml --plot " + dir_ + "/w.png");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("pip install 'ropegen[plot]'"));
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/w.png"));
}

// With the project's venv (make python, matplotlib installed): a PNG.
TEST_F(ExplainCliErrors, PlotWritesAPng) {
  const std::string path = "PATH=" + ropegen::test::source_path("/.venv/bin:$PATH ");
  if (run_command(path + "python3 -c 'import ropegen.plot, matplotlib'").exit_code != 0)
    GTEST_SKIP() << "the venv has no ropegen package with matplotlib (make python, pip install matplotlib)";
  const std::string png = dir_ + "/w.png";
  const test::CommandResult r = run_command(path + kTool + " explain " + kExamples + "/llama3_8b.yaml --max-pos 2048 "
                                            "--plot " + png + " --kind precision");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + png));
  std::ifstream in(png, std::ios::binary);
  std::string head(24, '\0');
  in.read(head.data(), 24);
  EXPECT_EQ(head.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace ropegen
