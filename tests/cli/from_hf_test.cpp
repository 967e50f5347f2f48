// rope-gen from-hf as users call it: the example configs give the example
// specs, the models the hand lists got wrong, layer types and NoPE layers,
// refusals that name the flag, and hostile inputs (exit 2 naming the key,
// never a crash, hang or silent guess).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_command.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::run_command;

const std::string kTool = ropegen::test::rope_gen_binary();
const std::string kExamples = ropegen::test::source_path("/examples");
const std::string kReal = ropegen::test::source_path("/tests/golden/hf_configs/");

class FromHf : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // from-hf on a config written from `json`.
  test::CommandResult from_hf(const std::string& json, const std::string& flags = "") {
    test::write_text(path("c.json"), json);
    return run_command(kTool + " from-hf " + path("c.json") + flags);
  }
  std::string dir_;
};

// from-hf on the real configs of the example models gives the example spec
// (everything but the name, which defaults to the model_type).
class FromHfExample : public FromHf, public ::testing::WithParamInterface<std::string> {};

TEST_P(FromHfExample, ConfigGivesTheExampleSpec) {
  const std::string model = GetParam();
  const auto converted = run_command(kTool + " from-hf " + kExamples + "/hf_configs/" + model + ".json --name " + model);
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  test::write_text(path("spec.yaml"), converted.out);
  const auto ours = run_command(kTool + " check " + path("spec.yaml"));
  const auto example = run_command(kTool + " check " + kExamples + "/" + model + ".yaml");
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  auto strip_layout = [](std::string s) {  // dtype/layout are deployment choices, not in the config
    for (const char* key : {"layout: ", "dtype: "}) {
      const size_t at = s.find(key);
      s.erase(at, s.find('\n', at) - at);
    }
    return s;
  };
  EXPECT_EQ(strip_layout(ours.out.substr(ours.out.find('\n'))), strip_layout(example.out.substr(example.out.find('\n'))));
}

INSTANTIATE_TEST_SUITE_P(Examples, FromHfExample,
                         ::testing::Values("llama2_7b", "llama3_8b", "qwen2_5_7b", "deepseek_v2", "phi3_5_mini",
                                           "gpt_neox_20b", "gptj_6b", "roformer"));

// The three models the hand-written lists got wrong with exit 0.
TEST_F(FromHf, CohereGlm4AndLlama4PairInterleaved) {
  for (const char* file : {"command_r.json", "glm4_9b_0414.json", "llama4_scout.json"}) {
    const auto r = run_command(kTool + " from-hf " + kReal + file);
    ASSERT_EQ(r.exit_code, 0) << file << r.err;
    EXPECT_THAT(r.out, HasSubstr("\npairing: interleaved\noutput_pairing: interleaved\n")) << file;
  }
  const auto glm = run_command(kTool + " from-hf " + kReal + "glm4_9b_0414.json");
  EXPECT_THAT(glm.out, HasSubstr("head_dim: 128\nrotary_dim: 64\n"));
  EXPECT_THAT(glm.out, HasSubstr("# pairing: interleaved, as transformers 5.24.0 `glm4` applies it"));
}

TEST_F(FromHf, Llama4ReportsNopeLayersAndTwoBandLlama3) {
  auto r = run_command(kTool + " from-hf " + kReal + "llama4_scout.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# layers 3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47 apply no RoPE (NoPE"));
  EXPECT_THAT(r.out, HasSubstr("head_dim: 128\n"));
  EXPECT_THAT(r.out, HasSubstr("dtype: bf16\n"));
  EXPECT_THAT(r.out, HasSubstr("  scheme: custom\n  values: [1, 0.8"));  // theta 5e5, the first pair unscaled
  r = run_command(kTool + " from-hf " + kReal + "llama4_scout.json --layer-type nope");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("layer type `nope`: layers 3, 7, 11"));
  EXPECT_EQ(r.out, "");
}

// Gemma 3's published config: no head_dim, heads or rope_theta in
// text_config (HF fills them from Gemma3TextConfig), rope_scaling for the
// full-attention layers only, rope_local_base_freq's default for sliding ones.
TEST_F(FromHf, Gemma3LayerTypesFromTheShortConfig) {
  const std::string config = kReal + "gemma3_4b.json";
  auto r = run_command(kTool + " from-hf " + config);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("layer types differ in RoPE (full_attention, sliding_attention); choose one with "
                               "layer_type"));
  r = run_command(kTool + " from-hf " + config + " --layer-type sliding_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 256\nrotary_dim: 256\n"));
  EXPECT_THAT(r.out, HasSubstr("theta: 10000\nscaling:\n  type: none\n"));
  r = run_command(kTool + " from-hf " + config + " --layer-type full_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("theta: 1000000\nscaling:\n  type: linear\n  factor: 8\n"));
  EXPECT_THAT(r.out, HasSubstr("# rope_theta 1000000.0 is the default of transformers' gemma3_text config class"));
  r = run_command(kTool + " from-hf " + config + " --layer-type chunked_attention");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("layer_type chunked_attention: this config has no such layer type with RoPE "
                               "parameters; it has full_attention, sliding_attention"));
}

// Gemma 2's sliding and full layers share one RoPE: no flag needed, any of its layer types accepted.
TEST_F(FromHf, LayerTypesThatShareTheirRope) {
  const std::string config = kReal + "gemma2_9b.json";
  auto r = run_command(kTool + " from-hf " + config);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(kTool + " from-hf " + kReal + "gpt_oss_20b.json --layer-type sliding_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# layer type sliding_attention: the same RoPE as every layer\n"));
  EXPECT_THAT(r.out, HasSubstr("  type: yarn\n  factor: 32\n  original_max_position: 4096\n"));
  EXPECT_THAT(r.out, HasSubstr("  truncate: false\n"));
  r = run_command(kTool + " from-hf " + kReal + "gpt_oss_20b.json --layer-type chunked_attention");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("it has full_attention, sliding_attention"));
}

// HF: sliding layers take rope_local_base_freq or the class's local default, never the global rope_theta.
TEST_F(FromHf, Gemma3SlidingLayersNeverTakeTheGlobalTheta) {
  const std::string config = R"({"model_type": "gemma3_text", "rope_theta": 500000,
    "rope_scaling": {"rope_type": "linear", "factor": 4}})";
  auto r = from_hf(config, " --layer-type sliding_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("theta: 10000\nscaling:\n  type: none\n"));
  EXPECT_THAT(r.out, HasSubstr("# rope_theta 10000.0 is the default of transformers' gemma3_text config class\n"));
  r = from_hf(config, " --layer-type full_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("theta: 500000\nscaling:\n  type: linear\n  factor: 4\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("is the default")));
  r = from_hf(R"({"model_type": "gemma3_text", "rope_local_base_freq": 20000})", " --layer-type sliding_attention");
  EXPECT_THAT(r.out, HasSubstr("theta: 20000\n"));
}

TEST_F(FromHf, Gemma3FiveXPerLayerParameters) {
  const auto r = from_hf(R"({"model_type": "gemma3_text", "rope_parameters": {
    "full_attention": {"rope_type": "linear", "factor": 8, "rope_theta": 1000000},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000}}})", " --layer-type full_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 256\n"));
  EXPECT_THAT(r.out, HasSubstr("type: linear\n  factor: 8\n"));
}

TEST_F(FromHf, DeepSeekV3InterleavedInHalfOut) {
  const auto r = run_command(kTool + " from-hf " + kReal + "deepseek_v3.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 192\nrotary_dim: 64\nrotary_offset: 128\npairing: interleaved\n"
                               "output_pairing: half\n"));
  // rope_interleave false: the attention takes the plain rotate_half apply.
  const auto plain = from_hf(R"({"model_type": "deepseek_v3", "rope_interleave": false})");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("pairing: half\noutput_pairing: half\n"));
}

TEST_F(FromHf, UnknownModelTypeNeedsThePairingFlag) {
  const std::string mystery = R"({"model_type": "mystery", "hidden_size": 512, "num_attention_heads": 8,
    "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "yarn", "rope_theta": 50000,
    "original_max_position_embeddings": 2048, "partial_rotary_factor": 0.5}})";
  auto r = from_hf(mystery);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("model_type `mystery` is not in rope-gen's model table (generated from transformers "
                               "5.24.0)"));
  EXPECT_THAT(r.err, HasSubstr("pairing half (rotate_half: (i, i + d/2)) or pairing interleaved ((2i, 2i+1))"));
  r = from_hf(mystery, " --pairing interleaved");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 64\nrotary_dim: 32\nrotary_offset: 0\npairing: interleaved\n"));
  EXPECT_THAT(r.out, HasSubstr("  factor: 4\n  original_max_position: 2048\n"));
  EXPECT_THAT(r.out, HasSubstr("theta: 50000\n"));
  // A model the table knows: the flag may not contradict HF.
  r = from_hf(R"({"model_type": "cohere", "hidden_size": 512, "num_attention_heads": 8})", " --pairing half");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("pairing half: transformers' cohere pairs interleaved"));
}

TEST_F(FromHf, RefusedModelTypeNamesTheReason) {
  const auto r = from_hf(R"({"model_type": "nanochat", "hidden_size": 512, "num_attention_heads": 8})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("model_type `nanochat`: rope-gen cannot tell its RoPE from transformers 5.24.0: it "
                               "rotates by minus the angle"));
}

TEST_F(FromHf, MropeSectionsBecomeAxes) {
  auto r = from_hf(R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("scaling:\n  type: none\npositions: explicit\naxes:\n  sections: [16, 24, 24]\n"
                               "  interleaved: false\n  per_axis_frequencies: false\n"));
  r = from_hf(R"({"model_type": "qwen3_vl", "vision_config": {"hidden_size": 1152},
    "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
    "rope_theta": 5000000, "rope_scaling": {"rope_type": "default", "mrope_interleaved": true,
    "mrope_section": [24, 20, 20]}}})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("name: qwen3_vl\nencoding: rope\nhead_dim: 128\n"));
  EXPECT_THAT(r.out, HasSubstr("theta: 5000000\n"));
  EXPECT_THAT(r.out, HasSubstr("positions: explicit\naxes:\n  sections: [24, 20, 20]\n  interleaved: true\n"));
}

TEST_F(FromHf, DtypeFromTheConfig) {
  auto r = from_hf(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "torch_dtype": "float16"})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# dtype: f16, the config's float16\n"));
  EXPECT_THAT(r.out, HasSubstr("\ndtype: f16\n"));
  r = from_hf(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})");
  EXPECT_THAT(r.out, HasSubstr("# dtype: f32 (the config names none)\n"));
  r = from_hf(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "dtype": "float8_e4m3fn"})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("`dtype` float8_e4m3fn is not one rope-gen stores"));
}

TEST_F(FromHf, DirectoryHoldingConfigJson) {
  std::filesystem::create_directories(path("snapshot"));
  auto r = run_command(kTool + " from-hf " + path("snapshot"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is a directory without a config.json"));
  std::filesystem::copy_file(kReal + "mistral_7b.json", path("snapshot/config.json"));
  r = run_command(kTool + " from-hf " + path("snapshot"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# rope-gen spec converted from " + path("snapshot/config.json")));
}

// Hostile configs: exit 2 naming the key, nothing on stdout.
struct Hostile {
  const char* json;
  const char* message;
};

class FromHfHostile : public FromHf, public ::testing::WithParamInterface<Hostile> {};

TEST_P(FromHfHostile, ExitsTwoNamingTheKey) {
  const auto r = from_hf(GetParam().json);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    Keys, FromHfHostile,
    ::testing::Values(
        Hostile{R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 32.5})",
                "`num_attention_heads` must be a positive integer, not 32.5"},
        Hostile{R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": "1e4"})",
                "`rope_theta` must be a number, not \"1e4\""},
        Hostile{R"({"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 64,
                    "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1],
                    "long_factor": "x", "original_max_position_embeddings": 16}})",
                "`rope_scaling.long_factor` must be a list of numbers, not \"x\""},
        Hostile{R"({"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 64,
                    "rope_scaling": {"type": "longrope", "short_factor": [1, 1, "x", 1, 1, 1, 1, 1],
                    "long_factor": [1, 1, 1, 1, 1, 1, 1, 1], "original_max_position_embeddings": 16}})",
                "`rope_scaling.short_factor[2]` must be numbers, not \"x\""},
        Hostile{R"({"model_type": 7})", "`model_type` must be a string, not 7"},
        Hostile{R"({"model_type": "llama", "hidden_size": [64], "num_attention_heads": 4})",
                "`hidden_size` must be a positive integer, not [64]"},
        Hostile{R"({"model_type": "llama", "head_dim": -128})", "`head_dim` must be a positive integer, not -128"},
        Hostile{R"({"model_type": "llama", "head_dim": 1e300})", "`head_dim` must be a positive integer"},
        Hostile{R"({"model_type": "llama", "head_dim": 64, "rope_scaling": "linear"})",
                "`rope_scaling` must be an object, not \"linear\""},
        Hostile{R"({"model_type": "llama", "head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": true}})",
                "`rope_scaling.factor` must be a number, not true"},
        Hostile{R"({"model_type": "llama", "head_dim": 64, "partial_rotary_factor": 1.5})",
                "`partial_rotary_factor` (1.5) must be in (0, 1]"},
        Hostile{R"({"model_type": "gemma3", "text_config": "gemma"})", "`text_config` must be an object"},
        Hostile{R"({"model_type": "llama4_text", "head_dim": 64, "no_rope_layers": [1, "0"]})",
                "`no_rope_layers[1]` must be integers, not \"0\""},
        Hostile{R"({"model_type": "gemma3_text", "layer_types": "full_attention"})",
                "`layer_types` must be a list of strings"},
        Hostile{R"([1, 2, 3])", "a Hugging Face config must be a JSON object"},
        Hostile{R"({"model_type": "llama", "head_dim": 64, "max_position_embeddings": 1e300, "rope_scaling":
                    {"rope_type": "dynamic", "factor": 2}})",
                "`max_position_embeddings` must be a whole number of positions in 1..2^40, not 1e+300"},
        Hostile{R"({"model_type": "gemma3_text", "rope_parameters": {"full_attention": 5, "sliding_attention": {}}})",
                "`rope_parameters` mixes per-layer-type objects (`sliding_attention`) with other keys"},
        Hostile{R"({"model_type": "llama4_text", "head_dim": 64, "no_rope_layers": [0, 0, 0]})",
                "`no_rope_layers`: every layer applies no RoPE; there is no spec to write"},
        Hostile{R"({"model_type": "llama", "text_config": {"model_type": "nothing"}, "head_dim": 64})",
                "model_type `nothing` is not in rope-gen's model table"},
        Hostile{R"({"model_type": "llama", "head_dim": 64, "torch_dtype": 16})",
                "error: `torch_dtype` must be a string, not 16\n"},
        Hostile{R"({"model_type": "llama", "head_dim": 64, "rope_scaling": {"type": "yarn", "factor": 4,
                    "original_max_position_embeddings": "4096"}})",
                "`rope_scaling.original_max_position_embeddings` must be a number, not \"4096\""}));

TEST_F(FromHf, HostileFilesAreRefusedUnread) {
  // Deeply nested JSON: refused before parsing.
  test::write_text(path("deep.json"), std::string(100000, '[') + std::string(100000, ']'));
  auto r = run_command(kTool + " from-hf " + path("deep.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("JSON nested deeper than 32 levels"));
  // Larger than the cap (a sparse file: nothing is written).
  { std::ofstream(path("huge.json")); }
  std::filesystem::resize_file(path("huge.json"), 64u << 20);
  r = run_command(kTool + " from-hf " + path("huge.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is 67108864 bytes; a model config is at most 16777216 bytes"));
  // Not regular files: never opened, so neither reads forever nor blocks.
  r = run_command(kTool + " from-hf /dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("/dev/zero: error: is not a regular file"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  r = run_command(kTool + " from-hf " + path("fifo"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is not a regular file"));
  r = run_command(kTool + " from-hf " + path("missing.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot read it (does it exist?)"));
  test::write_text(path("bad.json"), "{not json");
  r = run_command(kTool + " from-hf " + path("bad.json"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is not valid JSON"));
  EXPECT_THAT(r.err, Not(HasSubstr("internal error")));
}

TEST_F(FromHf, UnsupportedRopeTypeIsNamed) {
  const auto r = from_hf(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    "rope_scaling": {"type": "magic", "factor": 2}})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("rope type `magic` (rope_scaling.rope_type) is not supported"));
}

// config.json as Python's json writes it: NaN / Infinity / -Infinity (and 1e999) where rope-gen does not read;
// a key it reads refuses them by name.
TEST_F(FromHf, NonFiniteLiteralsOfPythonsJson) {
  auto r = from_hf(R"({"model_type": "granitemoehybrid", "hidden_size": 64, "num_attention_heads": 4,
    "time_step_limit": [0.0, Infinity], "x": NaN, "y": -Infinity, "z": [1e999, -1e999], "s": "NaN"})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 16\n"));
  for (const char* value : {"Infinity", "-Infinity", "NaN", "1e999"}) {
    r = from_hf(std::string(R"({"model_type": "llama", "head_dim": 64, "rope_theta": )") + value + "}");
    EXPECT_EQ(r.exit_code, 2) << value;
    EXPECT_THAT(r.err, HasSubstr(std::string("`rope_theta` must be a number, not ") +
                                 (std::string(value) == "1e999" ? "Infinity" : value))) << value;
  }
  r = from_hf(R"({"model_type": NaN, "head_dim": 64})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("`model_type` must be a string, not NaN"));
  r = from_hf(R"({"model_type": "llama", "head_dim": 64, "x": Infinityy})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is not valid JSON"));
}

// --name is used as given: a name that is not a spec name is refused, never rewritten.
TEST_F(FromHf, NameIsUsedAsGiven) {
  const std::vector<std::string> names = {"../x", "a/b", "Mistral", "9lives", "x y", std::string(65, 'a')};
  for (const std::string& name : names) {
    auto r = run_command(kTool + " from-hf " + kReal + "mistral_7b.json --name '" + name + "'");
    EXPECT_EQ(r.exit_code, 2) << name;
    EXPECT_THAT(r.err, HasSubstr("--name `")) << name;
    EXPECT_THAT(r.err, HasSubstr("a spec name must be an identifier, [a-z_][a-z0-9_]* and at most 64 characters"));
    EXPECT_EQ(r.out, "");
  }
  auto r = run_command(kTool + " from-hf " + kReal + "gemma3_4b.json --all-layer-types --name ../g -o " + path("g"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--name `../g`"));
  EXPECT_FALSE(std::filesystem::exists(path("g")));
  r = run_command(kTool + " from-hf " + kReal + "mistral_7b.json --name m_7b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nname: m_7b\n"));
  // The default, model_type, is made a name: it is the config's text, not the user's.
  r = from_hf(R"({"model_type": "Llama-Like", "hidden_size": 64, "num_attention_heads": 4})", " --pairing half");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nname: llama_like\n"));
}

// --vision: the vision tower's 2D RoPE (numerically checked against HF in hf_vision_test).
TEST_F(FromHf, VisionTowersAsTwoAxisSpecs) {
  // Qwen2-VL's 4.x config: no vision model_type, the head from embed_dim (hidden_size is the merger's output).
  auto r = from_hf(R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "vision_config": {"embed_dim": 1280, "hidden_size": 1536, "num_heads": 16}})", " --vision");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("name: qwen2_vl_vision\nencoding: rope\nhead_dim: 80\nrotary_dim: 80\nrotary_offset: 0\n"
                               "pairing: half\n"));
  EXPECT_THAT(r.out, HasSubstr("  scheme: lang\n  theta: 10000\n"));
  EXPECT_THAT(r.out, HasSubstr("positions: explicit\naxes:\n  sections: [20, 20]\n  interleaved: false\n"
                               "  per_axis_frequencies: true\n"));
  EXPECT_THAT(r.out, HasSubstr("# rope_theta 10000: the vision config names none (HF's default)\n"));
  EXPECT_THAT(r.out, HasSubstr("# positions: explicit, [..., 2] = (h, w): the patch's row and column\n"));
  // Llama 4: interleaved (complex) pairs, ids (column + 1, row + 1), the 4.x rope_theta key.
  r = run_command(kTool + " from-hf --vision " + kReal + "llama4_scout.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("name: llama4_vision\nencoding: rope\nhead_dim: 88\nrotary_dim: 88\n"));
  EXPECT_THAT(r.out, HasSubstr("pairing: interleaved\noutput_pairing: interleaved\n"));
  EXPECT_THAT(r.out, HasSubstr("sections: [22, 22]\n  interleaved: false\n  per_axis_frequencies: true\n"));
  EXPECT_THAT(r.out, HasSubstr("(column + 1, row + 1)"));
  // Pixtral: theta^(-2i/d), even i on h, odd i on w: one custom list over both axes.
  r = from_hf(R"({"model_type": "pixtral", "head_dim": 8, "hidden_size": 64, "num_attention_heads": 8,
    "rope_theta": 10000.0})", " --vision");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("name: pixtral\n"));
  EXPECT_THAT(r.out, HasSubstr("  scheme: custom\n  values: [1, 0.01, 0.1, 0.001]\n"));
  EXPECT_THAT(r.out, HasSubstr("sections: [2, 2]\n  interleaved: false\n  per_axis_frequencies: false\n"));
}

TEST_F(FromHf, VisionRefusesWhatItHasNotChecked) {
  auto r = run_command(kTool + " from-hf --vision " + kReal + "gemma3_4b.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("vision: vision tower `siglip_vision_model` (model_type `gemma3`) is not one whose "
                               "2D RoPE rope-gen has checked against transformers; it converts llama4_vision_model (llama4), "
                               "pixtral (mistral3), qwen2_5_vl_vision (qwen2_5_vl), qwen2_vl_vision (qwen2_vl), "
                               "qwen3_vl_moe_vision (qwen3_vl_moe), qwen3_vl_vision (qwen3_vl)\n"));
  EXPECT_EQ(r.out, "");
  r = run_command(kTool + " from-hf --vision " + kReal + "mistral_7b.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("vision: this config (model_type `mistral`) has no `vision_config`"));
  r = from_hf(R"({"model_type": "qwen2_5_vl", "vision_config": {"hidden_size": 1260, "num_heads": 30}})", " --vision");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("vision: the qwen2_5_vl_vision head size 42 is not a multiple of 4"));
  r = from_hf(R"({"model_type": "qwen2_5_vl", "vision_config": {"hidden_size": 1280}})", " --vision");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("`vision_config.num_attention_heads` (or `num_heads`)"));
  r = from_hf(R"({"model_type": "mistral3", "vision_config": {"model_type": "pixtral", "head_dim": 64,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000}}})", " --vision");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("`vision_config.rope_parameters.rope_type` `yarn`: transformers' "
                               "PixtralVisionRotaryEmbedding + apply_rotary_pos_emb supports only `axial`"));
  r = from_hf(R"({"model_type": "qwen2_vl", "vision_config": {"embed_dim": 64, "num_heads": 4}})",
              " --vision --layer-type full_attention");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--layer-type excludes --vision"));
}

// --all-layer-types -o DIR: one spec per layer type with RoPE; NoPE layers reported, no spec.
TEST_F(FromHf, AllLayerTypesWritesOneSpecPerType) {
  auto r = run_command(kTool + " from-hf " + kReal + "gemma3_4b.json --all-layer-types -o " + path("g3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "layer type full_attention: " + path("g3") + "/gemma3_full_attention.yaml\n"
                   "layer type sliding_attention: " + path("g3") + "/gemma3_sliding_attention.yaml\n");
  const auto full = run_command(kTool + " check " + path("g3/gemma3_full_attention.yaml"));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_THAT(full.out, HasSubstr("name: gemma3_full_attention\n"));
  EXPECT_THAT(full.out, HasSubstr("theta: 1000000\nscaling:\n  type: linear\n  factor: 8\n"));
  const auto sliding = run_command(kTool + " check " + path("g3/gemma3_sliding_attention.yaml"));
  ASSERT_EQ(sliding.exit_code, 0) << sliding.err;
  EXPECT_THAT(sliding.out, HasSubstr("theta: 10000\nscaling:\n  type: none\n"));
  // Each file is what --layer-type gives (checked against HF by hf_models_test), named after its layer type.
  for (const std::string type : {"full_attention", "sliding_attention"}) {
    const auto one = run_command(kTool + " from-hf " + kReal + "gemma3_4b.json --name gemma3_" + type +
                                 " --layer-type " + type);
    std::ifstream in(path("g3/gemma3_" + type + ".yaml"));
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), one.out) << type;
  }
  // Llama 4: two layer types sharing one RoPE, and NoPE layers.
  r = run_command(kTool + " from-hf " + kReal + "llama4_scout.json --name scout --all-layer-types -o " + path("l4"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "layer type chunked_attention: " + path("l4") + "/scout_chunked_attention.yaml\n"
                   "layer type full_attention: " + path("l4") + "/scout_full_attention.yaml\n"
                   "layer type nope: its layers apply no RoPE (NoPE); no spec written\n");
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(path("l4"))) files += f.is_regular_file();
  EXPECT_EQ(files, 2u);
}

TEST_F(FromHf, AllLayerTypesRefusals) {
  // No layer types: nothing to split.
  auto r = run_command(kTool + " from-hf " + kReal + "mistral_7b.json --all-layer-types -o " + path("m"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--all-layer-types: this config names no layer types"));
  EXPECT_FALSE(std::filesystem::exists(path("m")));
  // NoPE layers but no layer types: the one spec (without the flag) is for every layer with RoPE.
  r = from_hf(R"({"model_type": "smollm3", "layer_types": [], "no_rope_layers": [1, 1, 0]})",
              " --all-layer-types -o " + path("s"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--all-layer-types: this config names no layer types (every layer with RoPE has the "
                               "same)"));
  // -o must be a directory; an output that is not a regular file is never replaced, and nothing is written.
  test::write_text(path("file"), "x");
  r = run_command(kTool + " from-hf " + kReal + "gemma3_4b.json --all-layer-types -o " + path("file"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("-o " + path("file") + ": not a directory"));
  std::filesystem::create_directories(path("g3/gemma3_sliding_attention.yaml"));
  r = run_command(kTool + " from-hf " + kReal + "gemma3_4b.json --all-layer-types -o " + path("g3"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("-o (layer type sliding_attention)"));
  EXPECT_FALSE(std::filesystem::exists(path("g3/gemma3_full_attention.yaml")));
  // Two layer types whose file names collide after the name is made an identifier.
  r = from_hf(R"({"model_type": "gemma3_text", "rope_parameters": {"full-attention": {"rope_theta": 1e6},
    "full_attention": {"rope_theta": 1e4}}})", " --all-layer-types -o " + path("c"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("are the same file"));
  r = run_command(kTool + " from-hf " + kReal + "gemma3_4b.json --all-layer-types");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--all-layer-types requires --out-dir"));
}

}  // namespace
}  // namespace ropegen
