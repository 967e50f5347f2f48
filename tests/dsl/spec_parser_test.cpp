// Valid specs: defaults, every field read, the normalised form a fixed point.
#include <gtest/gtest.h>

#include <filesystem>

#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

RopeSpec parse_ok(const std::string& text) {
  Result<RopeSpec> r = parse_spec(text, "t.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : format(r.errors()));
  return r.ok() ? *r : RopeSpec{};
}

TEST(SpecParser, MinimalSpecGetsDefaults) {
  const RopeSpec s = parse_ok("name: tiny\nhead_dim: 64\n");
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.rotary_dim, 64);
  EXPECT_EQ(s.rotary_offset, 0);
  EXPECT_EQ(s.pairing, Pairing::Half);
  EXPECT_EQ(s.layout, Layout::BSHD);
  EXPECT_EQ(s.dtype, DType::F32);
  EXPECT_EQ(s.frequency.scheme, FrequencyScheme::Lang);
  EXPECT_EQ(s.frequency.theta, 10000.0);
  EXPECT_EQ(s.scaling.type, ScalingType::None);
  EXPECT_FALSE(s.xpos.enabled);
  EXPECT_EQ(s.positions, PositionsMode::Implicit);
}

TEST(SpecParser, RotaryDimDefaultsToWhatFollowsTheOffset) {
  const RopeSpec s = parse_ok("name: mla\nhead_dim: 192\nrotary_offset: 128\n");
  EXPECT_EQ(s.rotary_dim, 64);
}

TEST(SpecParser, ReadsEveryYarnField) {
  const RopeSpec s = parse_ok(R"(name: ds
head_dim: 192
rotary_dim: 64
rotary_offset: 128
pairing: interleaved
layout: thd
dtype: bf16
frequency: {scheme: lang, theta: 10000}
scaling:
  type: yarn
  factor: 40
  original_max_position: 4096
  beta_fast: 32
  beta_slow: 1
  mscale: 0.707
  mscale_all_dim: 0.707
  truncate: false
positions: explicit
)");
  EXPECT_EQ(s.pairing, Pairing::Interleaved);
  EXPECT_EQ(s.layout, Layout::THD);
  EXPECT_EQ(s.dtype, DType::BF16);
  EXPECT_EQ(s.scaling.type, ScalingType::Yarn);
  EXPECT_EQ(s.scaling.factor, 40);
  EXPECT_EQ(s.scaling.original_max_position, 4096);
  EXPECT_EQ(s.scaling.mscale, 0.707);
  EXPECT_EQ(s.scaling.mscale_all_dim, 0.707);
  EXPECT_FALSE(s.scaling.truncate);
  EXPECT_FALSE(s.scaling.attention_factor.has_value());
  EXPECT_EQ(s.positions, PositionsMode::Explicit);
}

TEST(SpecParser, ReadsLongRopeListsAndPolicy) {
  const RopeSpec s = parse_ok(R"(name: phi
head_dim: 8
scaling:
  type: longrope
  factor: 32
  original_max_position: 4096
  short_factor: [1, 1.5, 2, 2.5]
  long_factor: [3, 4, 5, 6]
  policy: long
  attention_factor: 1.2
)");
  EXPECT_EQ(s.scaling.short_factor, (std::vector<double>{1, 1.5, 2, 2.5}));
  EXPECT_EQ(s.scaling.long_factor, (std::vector<double>{3, 4, 5, 6}));
  EXPECT_EQ(s.scaling.policy, LongRopePolicy::Long);
  EXPECT_EQ(s.scaling.attention_factor, 1.2);
}

TEST(SpecParser, XposAndOtherSchemes) {
  RopeSpec s = parse_ok("name: x\nhead_dim: 8\nxpos: {}\nfrequency: {scheme: pixel, max_freq: 256}\n");
  EXPECT_TRUE(s.xpos.enabled);
  EXPECT_EQ(s.xpos.scale_base, 512);
  EXPECT_EQ(s.frequency.max_freq, 256);
  s = parse_ok("name: x\nhead_dim: 8\nfrequency: {scheme: custom, values: [1, 0.5, 0.25, 0.125]}\n");
  EXPECT_EQ(s.frequency.values.size(), 4u);
  s = parse_ok("name: x\nhead_dim: 8\nfrequency: {scheme: constant, value: 2.5}\n");
  EXPECT_EQ(s.frequency.value, 2.5);
}

TEST(SpecParser, NormalisedFormIsAFixedPointWithTheSameHash) {
  const RopeSpec s = parse_ok(R"(name: l3
head_dim: 128
scaling: {type: llama3, factor: 8, original_max_position: 8192}
xpos: {scale_base: 256}
)");
  const std::string text = to_yaml(s);
  const RopeSpec again = parse_ok(text);
  EXPECT_EQ(to_yaml(again), text);
  EXPECT_EQ(spec_hash(again), spec_hash(s));
  EXPECT_EQ(spec_hash(s).size(), 16u);
  EXPECT_NE(spec_hash(s), spec_hash(parse_ok("name: l3\nhead_dim: 128\n")));
}

TEST(SpecParser, NormalisedTextIsExact) {
  EXPECT_EQ(to_yaml(parse_ok("name: a\nhead_dim: 4\nscaling: {type: linear, factor: 2.5}\n")),
            "name: a\nencoding: rope\nhead_dim: 4\nrotary_dim: 4\nrotary_offset: 0\npairing: half\noutput_pairing: half\n"
            "layout: bshd\ndtype: f32\nfrequency:\n  scheme: lang\n  theta: 10000\nscaling:\n  type: linear\n"
            "  factor: 2.5\npositions: implicit\n");
}

TEST(SpecParser, EveryExampleSpecIsValidAndAFixedPoint) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ROPEGEN_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++n;
    Result<RopeSpec> r = load_spec(entry.path().string());
    ASSERT_TRUE(r.ok()) << format(r.errors());
    EXPECT_EQ(to_yaml(parse_ok(to_yaml(*r))), to_yaml(*r)) << entry.path();
  }
  EXPECT_GE(n, 8);
}

}  // namespace
}  // namespace ropegen
