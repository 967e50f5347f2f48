// rope_math (the production frequency math) against the peers' golden values
// and the independent float64 reference, plus the angle accuracy it enables.
#include <gtest/gtest.h>

#include <cmath>

#include "ropegen/rope_math.h"
#include "ropegen/spec_io.h"
#include "support/golden.h"
#include "support/reference.h"

namespace ropegen {
namespace {

RopeSpec parse_ok(const std::string& text) {
  Result<RopeSpec> r = parse_spec(text, "case");
  if (!r.ok()) ADD_FAILURE() << format(r.errors());
  return r.ok() ? *r : RopeSpec{};
}

// Cases whose spec uses something spec v1 cannot express yet.
bool expressible(const test::GoldenCase& c) { return parse_spec(c.spec, c.name).ok(); }

TEST(RopeMathGolden, InvFreqAndAttentionFactorMatchThePeers) {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden_cases()) {
    if (!expressible(c)) continue;
    SCOPED_TRACE(c.name + " (" + c.peer + ")");
    const RopeFrequencies f = compute_frequencies(parse_ok(c.spec), c.seq_len);
    ASSERT_EQ(f.inv_freq.size(), c.inv_freq.size());
    // The peers compute in float32: agreement to a few float32 ulps.
    for (size_t i = 0; i < f.inv_freq.size(); ++i)
      EXPECT_NEAR(f.inv_freq[i], c.inv_freq[i], 4e-7 * std::abs(c.inv_freq[i]) + 1e-30) << "pair " << i;
    EXPECT_NEAR(f.attention_factor, c.attention_factor, 1e-6 * c.attention_factor);
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// A sweep of the spec space: rope_math and the reference agree to 1e-12.
TEST(RopeMathReference, AgreesWithIndependentReferenceAcrossTheSpecSpace) {
  const std::vector<std::string> scalings = {
      "",
      "scaling: {type: linear, factor: 4}\n",
      "scaling: {type: ntk, factor: 3}\n",
      "scaling: {type: dynamic, factor: 2, original_max_position: 512}\n",
      "scaling: {type: yarn, factor: 8, original_max_position: 2048}\n",
      "scaling: {type: yarn, factor: 8, original_max_position: 2048, truncate: false, beta_fast: 16, beta_slow: 2}\n",
      "scaling: {type: yarn, factor: 40, original_max_position: 4096, mscale: 0.707, mscale_all_dim: 0.5}\n",
      "scaling: {type: yarn, factor: 0.5, original_max_position: 4096, attention_factor: 1.3}\n",
      "scaling: {type: llama3, factor: 8, original_max_position: 8192}\n",
      "scaling: {type: llama3, factor: 32, original_max_position: 1024, low_freq_factor: 2, high_freq_factor: 8}\n",
  };
  const std::vector<std::pair<int, int>> dims = {{128, 128}, {64, 16}, {96, 24}, {4, 4}, {2, 2}, {256, 64}, {130, 34}};
  const std::vector<std::optional<int64_t>> seq_lens = {std::nullopt, 1, 511, 513, 100000};
  int n = 0;
  for (const auto& scaling : scalings)
    for (const auto& [head, rotary] : dims)
      for (double theta : {10000.0, 500000.0, 2.5})
        for (auto seq_len : seq_lens) {
          if (rotary == 2 && (scaling.find("ntk") != std::string::npos || scaling.find("dynamic") != std::string::npos))
            continue;
          const std::string text = "name: s\nhead_dim: " + std::to_string(head) +
                                   "\nrotary_dim: " + std::to_string(rotary) +
                                   "\nfrequency: {theta: " + std::to_string(theta) + "}\n" + scaling +
                                   "xpos: {scale_base: 256}\n";
          const RopeSpec spec = parse_ok(text);
          const RopeFrequencies f = compute_frequencies(spec, seq_len);
          const ref::Freqs r = ref::reference_freqs(spec, seq_len);
          SCOPED_TRACE(text);
          ASSERT_EQ(f.inv_freq.size(), r.inv_freq.size());
          for (size_t i = 0; i < f.inv_freq.size(); ++i) EXPECT_NEAR(f.inv_freq[i], r.inv_freq[i], 1e-12 * r.inv_freq[i]);
          EXPECT_NEAR(f.attention_factor, r.attention_factor, 1e-12);
          ASSERT_EQ(f.xpos_base.size(), r.xpos_scale.size());
          for (size_t i = 0; i < f.xpos_base.size(); ++i) EXPECT_NEAR(f.xpos_base[i], r.xpos_scale[i], 1e-15);
          ++n;
        }
  EXPECT_GT(n, 900);
}

TEST(RopeMathReference, OtherSchemesAndLongRopePolicies) {
  for (const char* freq : {"{scheme: pixel, max_freq: 64}", "{scheme: pixel}", "{scheme: constant, value: 0.25}",
                           "{scheme: custom, values: [1, 0.1, 0.01, 0.001]}"}) {
    const RopeSpec spec = parse_ok(std::string("name: s\nhead_dim: 8\nfrequency: ") + freq + "\n");
    const RopeFrequencies f = compute_frequencies(spec);
    const ref::Freqs r = ref::reference_freqs(spec, std::nullopt);
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f.inv_freq[i], r.inv_freq[i], 1e-14) << freq;
  }
  const std::string longrope =
      "name: s\nhead_dim: 8\nscaling: {type: longrope, factor: 16, original_max_position: 100, "
      "short_factor: [1, 2, 3, 4], long_factor: [5, 6, 7, 8], policy: ";
  for (const char* policy : {"per_call", "long", "short"})
    for (std::optional<int64_t> len : {std::optional<int64_t>{}, std::optional<int64_t>{100}, std::optional<int64_t>{101}}) {
      const RopeSpec spec = parse_ok(longrope + policy + "}\n");
      const RopeFrequencies f = compute_frequencies(spec, len);
      const ref::Freqs r = ref::reference_freqs(spec, len);
      for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f.inv_freq[i], r.inv_freq[i], 1e-15) << policy;
      EXPECT_NEAR(f.attention_factor, std::sqrt(1 + std::log(16.0) / std::log(100.0)), 1e-15);
    }
}

TEST(RopeMathLiterals, KnownValues) {
  // YaRN attention factor, HF's rule 0.1 ln(s) + 1, and DeepSeek's ratio.
  Scaling s;
  s.factor = 4;
  EXPECT_NEAR(yarn_attention_factor(s), 1.1386294361119891, 1e-15);
  s.factor = 40, s.mscale = 1.0, s.mscale_all_dim = 0.5;
  EXPECT_NEAR(yarn_attention_factor(s), (0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1), 1e-15);
  // Phi-3.5-mini: sqrt(1 + ln 32 / ln 4096).
  Scaling p;
  p.factor = 32, p.original_max_position = 4096;
  EXPECT_NEAR(longrope_attention_factor(p), 1.1902380714238083, 1e-15);
  // xPos power is centred on floor(seq_len / 2).
  const RopeSpec spec = parse_ok("name: s\nhead_dim: 8\nxpos: {scale_base: 512}\n");
  EXPECT_EQ(xpos_power(spec, 3, 7), 0.0);
  EXPECT_EQ(xpos_power(spec, 0, 7), -3.0 / 512);
}

// The angle pos * inv_freq at positions up to 2^20: rope_math's double value
// against a long double product, and HF's float32 product for comparison.
TEST(RopeMathAccuracy, AngleErrorUpTo2To20) {
  const RopeSpec spec = parse_ok("name: s\nhead_dim: 128\nfrequency: {theta: 500000}\n");
  const RopeFrequencies f = compute_frequencies(spec);
  double ours = 0, hf_f32 = 0;
  for (int64_t pos = 0; pos <= (1 << 20); pos += 997) {
    for (int i = 0; i < spec.num_pairs(); ++i) {
      const long double exact = static_cast<long double>(pos) * powl(500000.0L, -2.0L * i / 128);
      ours = std::max(ours, static_cast<double>(std::fabs(pos * f.inv_freq[i] - exact)));
      const float hf = static_cast<float>(pos) * static_cast<float>(f.inv_freq[i]);
      hf_f32 = std::max(hf_f32, static_cast<double>(std::fabs(hf - exact)));
    }
  }
  RecordProperty("max_angle_error_rad", std::to_string(ours));
  RecordProperty("hf_float32_angle_error_rad", std::to_string(hf_f32));
  std::printf("angle error up to 2^20: rope_math %.3g rad, HF float32 product %.3g rad\n", ours, hf_f32);
  EXPECT_LT(ours, 1e-9);
  EXPECT_GT(hf_f32, 1e-3);  // the floor we beat: float32 angles are off by milliradians at 1M
}

}  // namespace
}  // namespace ropegen
