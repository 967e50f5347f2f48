// ropegen::from_hf (include/ropegen/from_hf.h): the library agrees with
// `rope-gen from-hf` (tests/cli/from_hf_test.cpp covers the conversions).
#include <gtest/gtest.h>

#include <string>

#include "ropegen/from_hf.h"
#include "ropegen/spec_io.h"
#include "support/test_paths.h"

namespace ropegen {
namespace {

const std::string kLlama3 = R"({
  "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
  "max_position_embeddings": 131072, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"}
})";

FromHfOptions named(const std::string& name) {
  FromHfOptions o;
  o.name = name;
  return o;
}

TEST(FromHf, Llama3FromText) {
  const Result<RopeSpec> spec = from_hf(kLlama3, named("llama3_8b"));
  ASSERT_TRUE(spec.ok()) << format(spec.errors());
  EXPECT_EQ(spec->name, "llama3_8b");
  EXPECT_EQ(spec->head_dim, 128);
  EXPECT_EQ(spec->pairing, Pairing::Half);
  EXPECT_EQ(spec->dtype, DType::BF16);
  const std::string yaml = to_yaml(*spec);
  EXPECT_NE(yaml.find("theta: 500000\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("type: llama3\n"), std::string::npos) << yaml;
  // Validated: the normalised text parses back to the same spec.
  const Result<RopeSpec> again = parse_spec(yaml, "again");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(spec_hash(*again), spec_hash(*spec));
}

TEST(FromHf, FileAndDirectoryGiveTheSameSpec) {
  const Result<RopeSpec> file = from_hf_file(ropegen::test::source_path("/examples/hf_configs/llama3_8b.json"));
  ASSERT_TRUE(file.ok()) << format(file.errors());
  EXPECT_EQ(file->name, "llama");  // model_type
  EXPECT_EQ(file->dtype, DType::F32);
  const Result<RopeSpec> text = from_hf(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0,
    "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  ASSERT_TRUE(text.ok()) << format(text.errors());
  EXPECT_EQ(to_yaml(*text), to_yaml(*file));
}

TEST(FromHf, ErrorsNameTheKey) {
  const Result<RopeSpec> bad =
      from_hf(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "rope_theta": "big"})", {},
              "my/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(format(bad.errors()), "my/config.json: error: `rope_theta` must be a number, not \"big\"\n");
  EXPECT_FALSE(from_hf("not json").ok());
  EXPECT_FALSE(from_hf_file("/nonexistent/config.json").ok());
}

TEST(FromHf, VisionTower) {
  const Result<RopeSpec> text = from_hf_file(ropegen::test::source_path("/examples/hf_configs/llama3_8b.json"), [] {
    FromHfOptions o;
    o.vision = true;
    return o;
  }());
  EXPECT_FALSE(text.ok());  // a text-only model has no vision tower
}

}  // namespace
}  // namespace ropegen
