// rope-gen from-hf on the newest models of transformers 5.24 (their specs are
// checked against HF's own code by hf_models_test): what each spec says, the
// flags that choose among layer types and rope sets, and the refusal of what
// the spec cannot express.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cli_fixture.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;

const std::string kReal = ropegen::test::source_path("/tests/golden/hf_configs/");

class FromHfNewest : public test::CliFixture {
 protected:
  // from-hf on a config written from `json`.
  test::CommandResult from_hf(const std::string& json, const std::string& flags = "") {
    return rope_gen("from-hf " + spec("c.json", json) + flags);
  }
};

// Gemma 4: per-layer head sizes (full_attention 512, sliding 256) from per_layer_config, as transformers 5.24
// saves them; proportional RoPE (a quarter of the full layers' pairs rotate) as custom frequencies.
TEST_F(FromHfNewest, Gemma4HeadSizesPerLayerType) {
  const std::string config = kReal + "gemma4_e4b.json";
  auto r = rope_gen("from-hf " + config);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("layer types differ in RoPE (full_attention, sliding_attention); choose one"));
  r = rope_gen("from-hf " + config + " --layer-type full_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# layer type full_attention: head_dim 512 (per_layer_config)\n"));
  EXPECT_THAT(r.out, HasSubstr("# proportional RoPE: 64 rotating pairs over the whole head of 512, the rest with "
                               "frequency 0\n"));
  EXPECT_THAT(r.out, HasSubstr("head_dim: 512\nrotary_dim: 512\nrotary_offset: 0\npairing: half\n"));
  EXPECT_THAT(r.out, HasSubstr("  scheme: custom\n  values: [1, 0.947"));  // 1e6^(-2i/512)
  r = rope_gen("from-hf " + config + " --layer-type sliding_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 256\nrotary_dim: 256\n"));
  EXPECT_THAT(r.out, HasSubstr("  scheme: lang\n  theta: 10000\n"));
  // The older config.json spelling (global_head_dim), and none at all: the config class's default.
  const std::string types = R"("layer_types": ["sliding_attention", "full_attention"], "head_dim": 128)";
  r = from_hf(R"({"model_type": "gemma4_text", "global_head_dim": 384, )" + types + "}",
              " --layer-type full_attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# layer type full_attention: head_dim 384 (global_head_dim)\n"));
  EXPECT_THAT(r.out, HasSubstr("head_dim: 384\n"));
  r = from_hf(R"({"model_type": "gemma4_text", )" + types + "}", " --layer-type full_attention");
  EXPECT_THAT(r.out, HasSubstr("head_dim: 512\n"));
  EXPECT_THAT(r.out, HasSubstr("(the config class's default)"));
  r = from_hf(R"({"model_type": "gemma4_text", )" + types + "}", " --layer-type sliding_attention");
  EXPECT_THAT(r.out, HasSubstr("head_dim: 128\n"));
  // Layers of one type must agree, as transformers requires.
  r = from_hf(R"({"model_type": "gemma4_text", "layer_types": ["full_attention", "full_attention"],
    "per_layer_config": {"0": {"head_dim": 512}}})", " --layer-type full_attention");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("`per_layer_config`: layers 0 and 1 are both full_attention but their values differ"));
  r = from_hf(R"({"model_type": "gemma4_text", "layer_types": ["full_attention"], "per_layer_config": {"7": {}}})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("`per_layer_config` keys are layer indices below the 1 entries of `layer_types`, "
                               "not `7`"));
}

// DeepSeek-V4: the trailing 64 of 512 dims rotate, interleaved; two rope parameter sets (main: theta 1e4;
// compress: theta 1.6e5, YaRN with attention_factor 1) that the attention picks by layer type.
TEST_F(FromHfNewest, DeepSeekV4RopeSets) {
  const std::string config = kReal + "deepseek_v4_flash.json";
  auto r = rope_gen("from-hf " + config);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("layer types differ in RoPE (compress, main); choose one with layer_type (or an "
                               "attention layer type: `compress` for compressed_sparse_attention, "
                               "heavily_compressed_attention; `main` for sliding_attention)"));
  r = rope_gen("from-hf " + config + " --layer-type main");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 512\nrotary_dim: 64\nrotary_offset: 448\npairing: interleaved\n"
                               "output_pairing: interleaved\n"));
  EXPECT_THAT(r.out, HasSubstr("  theta: 10000\nscaling:\n  type: none\n"));
  EXPECT_THAT(r.out, HasSubstr("# layer type main: its own rope parameters (transformers' deepseek_v4 attention uses "
                               "them on sliding_attention layers)\n"));
  EXPECT_THAT(r.out, HasSubstr("that is this spec's backward kernel on the output: `rope-gen apply --backward`"));
  r = rope_gen("from-hf " + config + " --layer-type compress");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  theta: 160000\nscaling:\n  type: yarn\n  factor: 16\n  original_max_position: "
                               "65536\n  beta_fast: 32\n  beta_slow: 1\n  attention_factor: 1\n"));
  // An attention layer type picks its set; the spec is the set's.
  const auto sliding = rope_gen("from-hf " + config + " --layer-type sliding_attention");
  ASSERT_EQ(sliding.exit_code, 0) << sliding.err;
  EXPECT_THAT(sliding.out, HasSubstr("# layer type sliding_attention: transformers' deepseek_v4 attention applies "
                                     "the rope parameters `main`\n"));
  const auto main = rope_gen("from-hf " + config + " --layer-type main");
  EXPECT_EQ(sliding.out.substr(sliding.out.find("\nname:")), main.out.substr(main.out.find("\nname:")));
  // A flat rope_parameters is spread as the config class does: the scaling reaches compress only, whose theta is
  // compress_rope_theta (the flat one is ignored).
  r = from_hf(R"({"model_type": "deepseek_v4", "compress_rope_theta": 200000, "rope_parameters": {"rope_type": "yarn",
    "factor": 4, "original_max_position_embeddings": 1024, "rope_theta": 5}})", " --layer-type compress");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  theta: 200000\nscaling:\n  type: yarn\n  factor: 4\n"));
  r = rope_gen("from-hf " + config + " --all-layer-types -o " + path("v4"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "layer type compress: " + path("v4") + "/deepseek_v4_compress.yaml\n"
                   "layer type main: " + path("v4") + "/deepseek_v4_main.yaml\n");
}

// GLM-4V (contiguous sections over the interleaved pairs of a half-size rotary part) and Qwen3-Omni's thinker
// (thinker_config.text_config, round robin whatever mrope_interleaved says).
TEST_F(FromHfNewest, MultimodalRopeOfGlm4vAndQwen3Omni) {
  auto r = rope_gen("from-hf " + kReal + "glm4_1v_9b.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 128\nrotary_dim: 64\nrotary_offset: 0\npairing: interleaved\n"));
  EXPECT_THAT(r.out, HasSubstr("positions: explicit\naxes:\n  sections: [8, 12, 12]\n  interleaved: false\n"));
  r = from_hf(R"({"model_type": "glm4v_text", "hidden_size": 4096, "num_attention_heads": 32,
    "partial_rotary_factor": 0.5})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# mrope_section 8, 12, 12: the default of transformers' `Glm4vTextRotaryEmbedding` "
                               "(the config names none)\n"));
  r = rope_gen("from-hf " + kReal + "qwen3_omni_30b_a3b.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("name: qwen3_omni_moe\nencoding: rope\nhead_dim: 128\nrotary_dim: 128\n"));
  EXPECT_THAT(r.out, HasSubstr("  theta: 1000000\n"));
  EXPECT_THAT(r.out, HasSubstr("axes:\n  sections: [24, 20, 20]\n  interleaved: true\n"));
  r = from_hf(R"({"model_type": "qwen3_omni_moe", "thinker_config": {"text_config": {
    "model_type": "qwen3_omni_moe_text", "head_dim": 128, "rope_scaling": {"mrope_section": [24, 20, 20], "mrope_interleaved": false}}}})");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# `thinker_config.text_config.rope_scaling.mrope_interleaved` false is not what "
                               "HF's code does: it ignores the key\n"));
  EXPECT_THAT(r.out, HasSubstr("  interleaved: true\n"));
}

// LongCat-Flash: MLA, interleaved in, half out. Mistral Large 4: a learned frequency scale, refused with what a
// spec would need, whatever the flags.
TEST_F(FromHfNewest, LongcatFlashAndMistralLarge4) {
  auto r = rope_gen("from-hf " + kReal + "longcat_flash_chat.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("head_dim: 192\nrotary_dim: 64\nrotary_offset: 128\npairing: interleaved\n"
                               "output_pairing: half\n"));
  EXPECT_THAT(r.out, HasSubstr("  theta: 10000000\n"));
  for (const std::string flags : {"", " --pairing interleaved"}) {
    r = from_hf(R"({"model_type": "mistral_large4", "text_config": {"model_type": "mistral_large4_text",
      "qk_rope_head_dim": 64, "qk_nope_head_dim": 64}})", flags);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, HasSubstr("model_type `mistral_large4_text`: a spec cannot express the RoPE of transformers "
                                 "5.24.0: MistralLarge4TextRotaryEmbedding multiplies every rotary frequency by "
                                 "exp(alpha), a learned parameter (`alpha` [32]) stored in the checkpoint"));
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
}  // namespace ropegen
