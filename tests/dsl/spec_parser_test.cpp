// Valid specs: defaults, every field read, the normalised form a fixed point.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "ropegen/spec_io.h"
#include "support/test_paths.h"

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

// What a spec leaves out, the caller's defaults fill (PyTorch: the tensors'
// dtype, the call's layout); what it sets wins.
TEST(SpecParser, CallerDefaultsFillOnlyWhatTheSpecLeavesOut) {
  const SpecDefaults bf16_bhsd{DType::BF16, Layout::BHSD, PositionsMode::Explicit};
  Result<RopeSpec> open = parse_spec("name: a\nhead_dim: 8\n", "t.yaml", bf16_bhsd);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->dtype, DType::BF16);
  EXPECT_EQ(open->layout, Layout::BHSD);
  EXPECT_EQ(open->positions, PositionsMode::Explicit);
  Result<RopeSpec> fixed =
      parse_spec("name: a\nhead_dim: 8\ndtype: f16\nlayout: thd\npositions: implicit\n", "t.yaml", bf16_bhsd);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->dtype, DType::F16);
  EXPECT_EQ(fixed->layout, Layout::THD);
  EXPECT_EQ(fixed->positions, PositionsMode::Implicit);
  Result<RopeSpec> rows = parse_spec("name: a\nencoding: sinusoidal\ndim: 8\n", "t.yaml", {DType::F16, Layout::SBD, {}});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->layout, Layout::SBD);
  EXPECT_EQ(rows->dtype, DType::F16);
  Result<RopeSpec> wrong = parse_spec("name: a\nencoding: sinusoidal\ndim: 8\n", "t.yaml", bf16_bhsd);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(format(wrong.errors()).find("layout bhsd (the call's) is not a layout of sinusoidal (bsd, sbd, td)"),
            std::string::npos)
      << format(wrong.errors());
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

TEST(SpecParser, AxesDefaultToContiguousSectionsWithSharedFrequencies) {
  const RopeSpec s = parse_ok("name: vl\nhead_dim: 128\npositions: explicit\naxes: {sections: [16, 24, 24]}\n");
  EXPECT_EQ(s.axes.sections, (std::vector<int>{16, 24, 24}));
  EXPECT_EQ(s.axes.count(), 3);
  EXPECT_FALSE(s.axes.interleaved);
  EXPECT_FALSE(s.axes.per_axis_frequencies);
  EXPECT_FALSE(parse_ok("name: tiny\nhead_dim: 64\n").axes.enabled());
}

TEST(SpecParser, ReadsInterleavedAxesAndPerAxisFrequencies) {
  const RopeSpec s = parse_ok(R"(name: qwen3_vl
head_dim: 128
positions: explicit
axes:
  sections: [24, 20, 20]
  interleaved: true
  per_axis_frequencies: true
)");
  EXPECT_EQ(s.axes.sections, (std::vector<int>{24, 20, 20}));
  EXPECT_TRUE(s.axes.interleaved);
  EXPECT_TRUE(s.axes.per_axis_frequencies);
}

TEST(SpecParser, RuntimeFrequenciesHaveNoOtherKeys) {
  const RopeSpec s = parse_ok("name: r\nhead_dim: 8\nfrequency: {scheme: runtime}\nscaling: {type: none}\n");
  EXPECT_EQ(s.frequency.scheme, FrequencyScheme::Runtime);
  EXPECT_EQ(s.scaling.type, ScalingType::None);
}

// scaling type none is what the normalised text writes: it must parse back.
TEST(SpecParser, TableFrequenciesHaveNoOtherKeysAndRoundTrip) {
  const RopeSpec s = parse_ok("name: t\nhead_dim: 8\nrotary_dim: 4\npositions: explicit\nfrequency: {scheme: table}\n"
                              "axes: {sections: [1, 1]}\n");
  EXPECT_EQ(s.frequency.scheme, FrequencyScheme::Table);
  const std::string text = to_yaml(s);
  EXPECT_EQ(text, "name: t\nencoding: rope\nhead_dim: 8\nrotary_dim: 4\nrotary_offset: 0\npairing: half\n"
                  "output_pairing: half\nlayout: bshd\ndtype: f32\nfrequency:\n  scheme: table\nscaling:\n  type: none\n"
                  "positions: explicit\naxes:\n  sections: [1, 1]\n  interleaved: false\n  per_axis_frequencies: false\n");
  EXPECT_EQ(to_yaml(parse_ok(text)), text);
  EXPECT_NE(spec_hash(s), spec_hash(parse_ok("name: t\nhead_dim: 8\nrotary_dim: 4\npositions: explicit\n"
                                             "frequency: {scheme: runtime}\naxes: {sections: [1, 1]}\n")));
}

// kv_cache: dtype defaults to the spec's, page_size to 16 (paged); the
// normalised text writes it (and parses back); specs without it keep their text.
TEST(SpecParser, KvCacheDefaultsAndRoundTrip) {
  const RopeSpec s = parse_ok("name: t\nhead_dim: 8\nlayout: thd\ndtype: bf16\npositions: explicit\nkv_cache: {}\n");
  EXPECT_TRUE(s.kv_cache.enabled);
  EXPECT_EQ(s.kv_cache.layout, KvLayout::PagedNhd);
  EXPECT_EQ(s.kv_cache.page_size, 16);
  EXPECT_EQ(s.kv_cache.dtype, KvDType::BF16);
  const std::string text = to_yaml(s);
  EXPECT_NE(text.find("kv_cache:\n  layout: paged_nhd\n  page_size: 16\n  dtype: bf16\n"), std::string::npos) << text;
  EXPECT_EQ(to_yaml(parse_ok(text)), text);
  const RopeSpec c = parse_ok("name: t\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                              "kv_cache: {layout: contiguous, dtype: f16}\n");
  EXPECT_EQ(c.kv_cache.page_size, 1);
  EXPECT_NE(to_yaml(c).find("kv_cache:\n  layout: contiguous\n  dtype: f16\n"), std::string::npos) << to_yaml(c);
  EXPECT_EQ(to_yaml(parse_ok(to_yaml(c))), to_yaml(c));
  const RopeSpec plain = parse_ok("name: t\nhead_dim: 8\nlayout: thd\npositions: explicit\n");
  EXPECT_EQ(to_yaml(plain).find("kv_cache"), std::string::npos);
  EXPECT_NE(spec_hash(plain), spec_hash(c));
}

// qk_norm: type defaults to rms, weight to per_head; the normalised text
// writes every key (and parses back); specs without it keep their text.
TEST(SpecParser, QkNormDefaultsAndRoundTrip) {
  const RopeSpec s = parse_ok("name: t\nhead_dim: 128\nrotary_dim: 64\nqk_norm: {eps: 1.0e-6}\n");
  EXPECT_TRUE(s.qk_norm.enabled);
  EXPECT_EQ(s.qk_norm.type, QkNormType::Rms);
  EXPECT_EQ(s.qk_norm.weight, QkNormWeight::PerHead);
  EXPECT_EQ(s.qk_norm.eps, 1e-6);
  EXPECT_FALSE(s.has_pass_through());  // the kernel writes the normalised dims past the rotary range itself
  const std::string text = to_yaml(s);
  EXPECT_NE(text.find("qk_norm:\n  type: rms\n  eps: 1e-06\n  weight: per_head\n"), std::string::npos) << text;
  EXPECT_EQ(to_yaml(parse_ok(text)), text);
  const RopeSpec gemma = parse_ok("name: t\nhead_dim: 8\nqk_norm: {type: rms_one_plus, eps: 0.001, weight: none}\n");
  EXPECT_EQ(gemma.qk_norm.type, QkNormType::RmsOnePlus);
  EXPECT_FALSE(gemma.qk_norm.has_weight());
  EXPECT_NE(to_yaml(gemma).find("qk_norm:\n  type: rms_one_plus\n  eps: 0.001\n  weight: none\n"), std::string::npos);
  const RopeSpec plain = parse_ok("name: t\nhead_dim: 128\nrotary_dim: 64\n");
  EXPECT_EQ(to_yaml(plain).find("qk_norm"), std::string::npos);
  EXPECT_TRUE(plain.has_pass_through());
  EXPECT_NE(spec_hash(plain), spec_hash(s));
}

// fp8 caches: scale defaults to per_tensor and the normalised text writes it.
TEST(SpecParser, KvCacheFp8) {
  for (const char* dtype : {"fp8_e4m3", "fp8_e5m2"}) {
    const RopeSpec s = parse_ok(fmt::format("name: t\nhead_dim: 8\nlayout: thd\ndtype: bf16\npositions: explicit\n"
                                            "kv_cache: {{layout: paged_hnd, page_size: 4, dtype: {}}}\n",
                                            dtype));
    EXPECT_TRUE(s.kv_cache.is_fp8());
    EXPECT_EQ(s.kv_cache.dtype, std::string(dtype) == "fp8_e4m3" ? KvDType::Fp8E4m3 : KvDType::Fp8E5m2);
    const std::string text = to_yaml(s);
    EXPECT_NE(text.find(fmt::format("kv_cache:\n  layout: paged_hnd\n  page_size: 4\n  dtype: {}\n  scale: per_tensor\n",
                                    dtype)),
              std::string::npos)
        << text;
    EXPECT_EQ(to_yaml(parse_ok(text)), text);
  }
  const RopeSpec explicit_scale = parse_ok("name: t\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                           "kv_cache: {dtype: fp8_e5m2, scale: per_tensor}\n");
  EXPECT_EQ(explicit_scale.kv_cache.dtype, KvDType::Fp8E5m2);
}

TEST(SpecParser, SinusoidalDefaults) {
  const RopeSpec s = parse_ok("name: pe\nencoding: sinusoidal\ndim: 7\n");
  EXPECT_EQ(s.encoding, Encoding::Sinusoidal);
  EXPECT_EQ(s.dim, 7);
  EXPECT_EQ(s.base, 10000.0);
  EXPECT_EQ(s.layout, Layout::BSD);
  EXPECT_EQ(s.positions, PositionsMode::Implicit);
  EXPECT_EQ(s.table_form, TableForm::Interleaved);
  EXPECT_EQ(s.dtype, DType::F32);
}

TEST(SpecParser, ReadsEverySinusoidalField) {
  const RopeSpec s = parse_ok(R"(name: pe
encoding: sinusoidal
dim: 512
base: 500
layout: td
positions: explicit
table_form: roformer
dtype: f16
)");
  EXPECT_EQ(s.dim, 512);
  EXPECT_EQ(s.base, 500.0);
  EXPECT_EQ(s.layout, Layout::TD);
  EXPECT_EQ(s.positions, PositionsMode::Explicit);
  EXPECT_EQ(s.table_form, TableForm::Roformer);
  EXPECT_EQ(s.dtype, DType::F16);
}

TEST(SpecParser, LearnedPositionsAreExplicitByDefault) {
  RopeSpec s = parse_ok("name: gpt2\nencoding: learned\ndim: 768\n");
  EXPECT_EQ(s.encoding, Encoding::Learned);
  EXPECT_EQ(s.dim, 768);
  EXPECT_EQ(s.layout, Layout::BSD);
  EXPECT_EQ(s.positions, PositionsMode::Explicit);
  s = parse_ok("name: gpt2\nencoding: learned\ndim: 768\nlayout: sbd\npositions: implicit\ndtype: bf16\n");
  EXPECT_EQ(s.layout, Layout::SBD);
  EXPECT_EQ(s.positions, PositionsMode::Implicit);
  EXPECT_EQ(s.dtype, DType::BF16);
}

TEST(SpecParser, AlibiDefaultsAndForms) {
  RopeSpec s = parse_ok("name: mpt\nencoding: alibi\nnum_heads: 12\n");
  EXPECT_EQ(s.encoding, Encoding::Alibi);
  EXPECT_EQ(s.num_heads, 12);
  EXPECT_EQ(s.alibi_form, AlibiForm::Symmetric);
  s = parse_ok("name: bloom\nencoding: alibi\nnum_heads: 7\nform: bloom\ndtype: bf16\n");
  EXPECT_EQ(s.alibi_form, AlibiForm::Bloom);
  EXPECT_EQ(s.dtype, DType::BF16);
  EXPECT_EQ(parse_ok("name: a\nencoding: alibi\nnum_heads: 1\nform: causal\n").alibi_form, AlibiForm::Causal);
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

TEST(SpecParser, NormalisedTextOfEachEncodingHasOnlyItsFields) {
  EXPECT_EQ(to_yaml(parse_ok("name: pe\nencoding: sinusoidal\ndim: 64\n")),
            "name: pe\nencoding: sinusoidal\ndim: 64\nbase: 10000\ntable_form: interleaved\nlayout: bsd\ndtype: f32\n"
            "positions: implicit\n");
  EXPECT_EQ(to_yaml(parse_ok("name: wpe\nencoding: learned\ndim: 64\n")),
            "name: wpe\nencoding: learned\ndim: 64\nlayout: bsd\ndtype: f32\npositions: explicit\n");
  EXPECT_EQ(to_yaml(parse_ok("name: b\nencoding: alibi\nnum_heads: 8\n")),
            "name: b\nencoding: alibi\nnum_heads: 8\nform: symmetric\ndtype: f32\n");
  EXPECT_EQ(to_yaml(parse_ok("name: a\nhead_dim: 8\nfrequency: {scheme: runtime}\npositions: explicit\n"
                             "axes: {sections: [1, 3]}\n")),
            "name: a\nencoding: rope\nhead_dim: 8\nrotary_dim: 8\nrotary_offset: 0\npairing: half\noutput_pairing: half\n"
            "layout: bshd\ndtype: f32\nfrequency:\n  scheme: runtime\nscaling:\n  type: none\npositions: explicit\n"
            "axes:\n  sections: [1, 3]\n  interleaved: false\n  per_axis_frequencies: false\n");
}

// Specs that differ in one new field each: every one a fixed point, all hashes distinct.
TEST(SpecParser, EveryNewFieldChangesTheHash) {
  const std::string axes = "name: a\nhead_dim: 16\npositions: explicit\naxes: {sections: [";
  const std::vector<std::string> specs = {
      "name: a\nhead_dim: 16\npositions: explicit\n",
      axes + "2, 3, 3]}\n",
      axes + "3, 2, 3]}\n",
      axes + "2, 3, 3], per_axis_frequencies: true}\n",
      axes + "4, 2, 2], interleaved: true}\n",
      axes + "8]}\n",
      "name: a\nhead_dim: 16\nfrequency: {scheme: runtime}\n",
      "name: a\nencoding: sinusoidal\ndim: 16\n",
      "name: a\nencoding: sinusoidal\ndim: 17\n",
      "name: a\nencoding: sinusoidal\ndim: 16\nbase: 100\n",
      "name: a\nencoding: sinusoidal\ndim: 16\ntable_form: roformer\n",
      "name: a\nencoding: sinusoidal\ndim: 16\nlayout: sbd\n",
      "name: a\nencoding: sinusoidal\ndim: 16\nlayout: td\n",
      "name: a\nencoding: sinusoidal\ndim: 16\npositions: explicit\n",
      "name: a\nencoding: learned\ndim: 16\n",
      "name: a\nencoding: learned\ndim: 16\npositions: implicit\n",
      "name: a\nencoding: learned\ndim: 16\ndtype: f16\n",
      "name: a\nencoding: alibi\nnum_heads: 16\n",
      "name: a\nencoding: alibi\nnum_heads: 8\n",
      "name: a\nencoding: alibi\nnum_heads: 16\nform: causal\n",
      "name: a\nencoding: alibi\nnum_heads: 16\nform: bloom\n",
  };
  std::set<std::string> hashes;
  for (const std::string& text : specs) {
    const RopeSpec s = parse_ok(text);
    EXPECT_EQ(to_yaml(parse_ok(to_yaml(s))), to_yaml(s)) << text;
    EXPECT_TRUE(hashes.insert(spec_hash(s)).second) << text;
  }
}

TEST(SpecParser, EveryExampleSpecIsValidAndAFixedPoint) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ropegen::test::source_path("/examples"))) {
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
