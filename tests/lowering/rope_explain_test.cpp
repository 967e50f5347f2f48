// rope-gen explain's numbers: the pairs against the independent float64
// reference, the regimes and their values against the peers' own frequencies
// (HF's llama3, YaRN, LongRoPE, dynamic NTK, linear; lucidrains' NTK), and
// the precision figures against a recomputation here from their definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "lowering/rope_precision.h"
#include "ropegen/rope_explain.h"
#include "ropegen/rope_table.h"
#include "ropegen/spec_io.h"
#include "support/golden.h"
#include "support/reference.h"

namespace ropegen {
namespace {

constexpr double kTwoPi = 6.28318530717958647692;

RopeSpec parse_ok(const std::string& text) {
  Result<RopeSpec> r = parse_spec(text, "case");
  if (!r.ok()) ADD_FAILURE() << format(r.errors());
  return r.ok() ? *r : RopeSpec{};
}

Explanation explain_ok(const RopeSpec& spec, ExplainOptions o = {}) {
  Result<Explanation> e = explain(spec, o);
  if (!e.ok()) ADD_FAILURE() << format(e.errors());
  return e.ok() ? *e : Explanation{};
}

ExplainOptions frequencies_only(std::optional<int64_t> seq_len = std::nullopt) {
  ExplainOptions o;
  o.seq_len = seq_len;
  o.precision = false;
  return o;
}

test::GoldenCase golden(const std::string& name) {
  for (const test::GoldenCase& c : test::load_golden_cases())
    if (c.name == name) return c;
  ADD_FAILURE() << "no golden case " << name;
  return {};
}

std::map<std::string, int> regime_counts(const Explanation& e) {
  std::map<std::string, int> n;
  for (const PairExplanation& p : e.pairs) ++n[to_string(p.scaling.regime)];
  return n;
}

TEST(ExplainPairs, MatchTheReferenceAcrossSpecs) {
  const std::vector<std::string> specs = {
      "name: s\nhead_dim: 128\nfrequency: {theta: 500000}\n"
      "scaling: {type: llama3, factor: 8, original_max_position: 8192}\n",
      "name: s\nhead_dim: 64\nrotary_dim: 32\nscaling: {type: yarn, factor: 16, original_max_position: 2048}\n",
      "name: s\nhead_dim: 96\nscaling: {type: dynamic, factor: 2, original_max_position: 512}\n",
      "name: s\nhead_dim: 16\nscaling: {type: ntk, factor: 3}\n",
      "name: s\nhead_dim: 16\nscaling: {type: linear, factor: 4}\n",
      "name: s\nhead_dim: 8\nfrequency: {scheme: pixel, max_freq: 64}\n",
      "name: s\nhead_dim: 32\npositions: explicit\naxes: {sections: [4, 6, 6]}\n",
      "name: s\nhead_dim: 32\npositions: explicit\naxes: {sections: [6, 5, 5], interleaved: true}\n",
      "name: s\nhead_dim: 32\npositions: explicit\nscaling: {type: linear, factor: 2}\n"
      "axes: {sections: [8, 8], per_axis_frequencies: true}\n",
  };
  for (const std::string& text : specs)
    for (std::optional<int64_t> seq_len : {std::optional<int64_t>{}, std::optional<int64_t>{5000}}) {
      SCOPED_TRACE(text);
      const RopeSpec spec = parse_ok(text);
      const Explanation e = explain_ok(spec, frequencies_only(seq_len));
      RopeSpec unscaled = spec;
      unscaled.scaling = {};
      const ref::Freqs r = ref::reference_freqs(spec, seq_len), u = ref::reference_freqs(unscaled, std::nullopt);
      ASSERT_EQ(e.pairs.size(), r.inv_freq.size());
      EXPECT_FALSE(e.precision.has_value());
      for (size_t i = 0; i < e.pairs.size(); ++i) {
        const PairExplanation& p = e.pairs[i];
        EXPECT_EQ(p.index, static_cast<int>(i));
        EXPECT_NEAR(p.inv_freq, r.inv_freq[i], 1e-12 * r.inv_freq[i]) << "pair " << i;
        EXPECT_NEAR(p.inv_freq_unscaled, u.inv_freq[i], 1e-12 * u.inv_freq[i]) << "pair " << i;
        EXPECT_DOUBLE_EQ(p.wavelength, kTwoPi / p.inv_freq);
        EXPECT_DOUBLE_EQ(p.turns, static_cast<double>(e.context) * p.inv_freq / kTwoPi);
        const std::optional<int> axis = spec.axes.enabled() ? std::optional<int>(ref::pair_axis(spec.axes, static_cast<int>(i)))
                                                            : std::nullopt;
        EXPECT_EQ(p.axis, axis) << "pair " << i;
      }
      EXPECT_NEAR(e.attention_factor, r.attention_factor, 1e-15);
    }
}

// Llama 3.1 8B: wavelength 2 pi 500000^(i/64) against 8192 / 4 and 8192:
// pairs 0..28 kept, 29..34 blended, 35..63 divided by 8; each pair's smooth
// factor rebuilds HF's own inv_freq.
TEST(ExplainRegimes, Llama3ReproducesHf) {
  const test::GoldenCase c = golden("hf_freqs_llama31_8b_llama3");
  const Explanation e = explain_ok(parse_ok(c.spec), frequencies_only());
  EXPECT_EQ(regime_counts(e), (std::map<std::string, int>{{"kept", 29}, {"blended", 6}, {"interpolated", 29}}));
  for (const PairExplanation& p : e.pairs) {
    SCOPED_TRACE(p.index);
    const double w = p.scaling.value, u = p.inv_freq_unscaled;
    EXPECT_NEAR((1 - w) * u / 8 + w * u, c.inv_freq[p.index], 4e-7 * c.inv_freq[p.index]);
    EXPECT_EQ(p.scaling.regime == PairRegime::Kept, w == 1.0);
    EXPECT_EQ(p.scaling.regime == PairRegime::Interpolated, w == 0.0);
    EXPECT_EQ(p.scaling.regime == PairRegime::Blended, w > 0 && w < 1);
    EXPECT_EQ(p.turns >= 1, p.wavelength <= 8192);
  }
  EXPECT_EQ(e.attention_factor_source, "none");
  EXPECT_EQ(e.original_max_position, 8192);
  EXPECT_EQ(e.extended_context, 65536);
}

// YaRN: gamma (the weight of the unscaled frequency) rebuilds HF's inv_freq.
// Qwen2.5 (theta 1e6, original 32768): correction dims floor(23.6) = 23 and
// ceil(39.6) = 40, so pairs 0..23 extrapolated, 24..39 on the ramp, 40..63
// interpolated.
TEST(ExplainRegimes, YarnReproducesHf) {
  const std::map<std::string, std::map<std::string, int>> counts = {
      {"hf_freqs_qwen25_yarn", {{"extrapolated", 24}, {"ramp", 16}, {"interpolated", 24}}},
      {"hf_freqs_deepseek_v2_yarn", {}},
      {"hf_freqs_deepseek_v3_yarn", {}},
  };
  for (const auto& [name, expected] : counts) {
    SCOPED_TRACE(name);
    const test::GoldenCase c = golden(name);
    const RopeSpec spec = parse_ok(c.spec);
    const Explanation e = explain_ok(spec, frequencies_only());
    if (!expected.empty()) {
      EXPECT_EQ(regime_counts(e), expected);
    }
    for (const PairExplanation& p : e.pairs) {
      const double g = p.scaling.value, u = p.inv_freq_unscaled;
      EXPECT_NEAR((1 - g) * u / spec.scaling.factor + g * u, c.inv_freq[p.index], 4e-7 * c.inv_freq[p.index]) << p.index;
      EXPECT_EQ(p.scaling.regime == PairRegime::Extrapolated, g == 1.0) << p.index;
      EXPECT_EQ(p.scaling.regime == PairRegime::Interpolated, g == 0.0) << p.index;
    }
    EXPECT_NEAR(e.attention_factor, c.attention_factor, 1e-6);
  }
  EXPECT_EQ(explain_ok(parse_ok(golden("hf_freqs_qwen25_yarn").spec)).attention_factor_source, "yarn: 0.1*ln(factor)+1");
  EXPECT_EQ(explain_ok(parse_ok(golden("hf_freqs_deepseek_v2_yarn").spec)).attention_factor_source,
            "yarn: (0.1*mscale*ln(factor)+1) / (0.1*mscale_all_dim*ln(factor)+1)");
}

TEST(ExplainRegimes, LongRopeReproducesHf) {
  for (const auto& [name, regime] : {std::pair{"hf_freqs_phi35_mini_long", "long"}, {"hf_freqs_phi35_mini_short", "short"}}) {
    SCOPED_TRACE(name);
    const test::GoldenCase c = golden(name);
    const Explanation e = explain_ok(parse_ok(c.spec), frequencies_only(c.seq_len));
    ASSERT_EQ(e.pairs.size(), 48u);
    for (const PairExplanation& p : e.pairs) {
      EXPECT_STREQ(to_string(p.scaling.regime), regime);
      EXPECT_NEAR(p.inv_freq_unscaled / p.scaling.value, c.inv_freq[p.index], 4e-7 * c.inv_freq[p.index]);
    }
    EXPECT_NEAR(e.attention_factor, c.attention_factor, 1e-7);
    EXPECT_EQ(e.attention_factor_source, "longrope: sqrt(1+ln(factor)/ln(original_max_position))");
  }
}

// Linear: the divisor; NTK (lucidrains) and dynamic NTK (HF at seq_len 8192):
// the effective base gives the peers' frequencies as base^(-2i/d).
TEST(ExplainRegimes, LinearAndNtkReproduceThePeers) {
  for (const char* name : {"hf_freqs_linear_factor4", "lr_theta_rescale", "hf_freqs_dynamic_llama2_seq8192"}) {
    SCOPED_TRACE(name);
    const test::GoldenCase c = golden(name);
    const RopeSpec spec = parse_ok(c.spec);
    const Explanation e = explain_ok(spec, frequencies_only(c.seq_len));
    for (const PairExplanation& p : e.pairs) {
      EXPECT_EQ(p.scaling.regime, PairRegime::Scaled);
      const double expected = spec.scaling.type == ScalingType::Linear
                                  ? p.inv_freq_unscaled / p.scaling.value
                                  : std::pow(p.scaling.value, -2.0 * p.index / spec.rotary_dim);
      EXPECT_NEAR(expected, c.inv_freq[p.index], 4e-7 * c.inv_freq[p.index]) << p.index;
    }
  }
  const Explanation dynamic = explain_ok(parse_ok(golden("hf_freqs_dynamic_llama2_seq8192").spec), frequencies_only(8192));
  EXPECT_EQ(dynamic.seq_len, 8192);
}

// --- precision, against its definition evaluated here -----------------------

// The nearest bf16 to x (ties to even), from the three bf16 values around
// x's float32 rounding.
double nearest_bf16(double x) {
  const float f = static_cast<float>(x);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  double best = 0, best_error = INFINITY;
  bool best_even = false;
  for (uint32_t step : {0xffffu, 0u, 1u}) {  // -1, 0, +1 in the top half, wrapping (no shift of a negative)
    const uint32_t b = ((bits >> 16) + step) << 16;
    float v;
    std::memcpy(&v, &b, 4);
    const double error = std::fabs(static_cast<double>(v) - x);
    const bool even = ((b >> 16) & 1) == 0;
    if (error < best_error || (error == best_error && even && !best_even)) best = v, best_error = error, best_even = even;
  }
  return best;
}

TrigErrors recompute(const RopeSpec& spec, const std::vector<double>& inv, double a, int64_t first, int64_t last) {
  TrigErrors t;
  for (int64_t p = first; p <= last; ++p)
    for (double f : inv) {
      const long double exact = static_cast<long double>(p) * f;  // exact: p < 2^11
      const float angle = static_cast<float>(p) * static_cast<float>(f);
      for (int s = 0; s < 2; ++s) {
        const double reference = static_cast<double>(a * (s ? sinl(exact) : cosl(exact)));
        const double value = a * (s ? std::sin(static_cast<double>(angle)) : std::cos(static_cast<double>(angle)));
        t.f32_angle = std::max(t.f32_angle, std::fabs(value - reference));
        t.bf16_table = std::max(t.bf16_table, std::fabs(nearest_bf16(value) - reference));
        t.f16_table = std::max(t.f16_table, std::fabs(static_cast<double>(static_cast<_Float16>(value)) - reference));
      }
    }
  return t;
}

void expect_errors_near(const TrigErrors& got, const TrigErrors& want) {
  EXPECT_NEAR(got.f32_angle, want.f32_angle, 1e-15);
  EXPECT_NEAR(got.bf16_table, want.bf16_table, 1e-15);
  EXPECT_NEAR(got.f16_table, want.f16_table, 1e-15);
}

TEST(ExplainPrecision, MatchesItsDefinitionPerBin) {
  // YaRN for an attention factor other than 1.
  const RopeSpec spec = parse_ok("name: s\nhead_dim: 32\nscaling: {type: yarn, factor: 4, original_max_position: 512}\n");
  ExplainOptions o;
  o.max_pos = 2000;
  const Explanation e = explain_ok(spec, o);
  ASSERT_TRUE(e.precision);
  const Precision& p = *e.precision;
  EXPECT_EQ(p.max_pos, 2000);
  EXPECT_EQ(p.positions_checked, 2001);
  EXPECT_FALSE(p.sampled);
  EXPECT_FALSE(p.max_error.rope_gen);
  EXPECT_EQ(p.rope_gen_note, "the kernel was not run");
  std::vector<double> inv;
  for (const PairExplanation& q : e.pairs) inv.push_back(q.inv_freq);
  ASSERT_EQ(p.by_position.size(), 11u);  // 0..1, 2..3, ..., 1024..2000
  int64_t next = 0;
  for (const PrecisionBin& b : p.by_position) {
    SCOPED_TRACE(b.first);
    EXPECT_EQ(b.first, next);
    next = b.last + 1;
    expect_errors_near(b.max_error, recompute(spec, inv, e.attention_factor, b.first, b.last));
  }
  EXPECT_EQ(next, 2001);
  expect_errors_near(p.max_error, recompute(spec, inv, e.attention_factor, 0, 2000));
  // Rounding to bf16 / f16 can only add to the float32 angle's error here.
  EXPECT_GT(p.max_error.bf16_table, 1e-3);
  EXPECT_GT(p.max_error.f16_table, 1e-4);
}

// A kernel table standing in for the kernel: rope_table's float32 rounding of
// float64 values, so rope_gen is at most half a float32 ulp of |a|; the
// callback sees every axis at each position.
TEST(ExplainPrecision, KernelColumnIsTheTablesError) {
  const RopeSpec spec = parse_ok("name: s\nhead_dim: 16\npositions: explicit\naxes: {sections: [2, 3, 3]}\n"
                                 "scaling: {type: yarn, factor: 4, original_max_position: 64}\n");
  ExplainOptions o;
  o.max_pos = 1000;
  int calls = 0;
  o.kernel_table = [&](const std::vector<int64_t>& ids, int64_t seq_len) -> Result<std::vector<float>> {
    ++calls;
    EXPECT_EQ(seq_len, 64);
    EXPECT_EQ(ids.size() % 3, 0u);
    for (size_t i = 0; i < ids.size(); i += 3) EXPECT_TRUE(ids[i] == ids[i + 1] && ids[i] == ids[i + 2]);
    Result<RopeTable> t = rope_table(spec, ids, seq_len);
    if (!t) return t.errors();
    return t->values;
  };
  const Explanation e = explain_ok(spec, o);
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(e.precision && e.precision->max_error.rope_gen);
  EXPECT_GT(*e.precision->max_error.rope_gen, 0.0);
  EXPECT_LE(*e.precision->max_error.rope_gen, e.attention_factor * 0x1p-24 * 1.0000001);
  for (const PrecisionBin& b : e.precision->by_position) EXPECT_TRUE(b.max_error.rope_gen.has_value());

  o.kernel_table = [](const std::vector<int64_t>&, int64_t) -> Result<std::vector<float>> {
    return Diagnostic{{"kernel", -1, -1}, "no kernel here", {}};
  };
  const Result<Explanation> failed = explain(spec, o);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.errors()[0].message, "no kernel here");
}

TEST(ExplainPrecision, SamplesPastTheExhaustiveLimit) {
  EXPECT_EQ(lowering::precision_positions(kExhaustivePositions).size(), static_cast<size_t>(kExhaustivePositions + 1));
  const int64_t max_pos = (int64_t{1} << 20) + 3;
  const std::vector<int64_t> positions = lowering::precision_positions(max_pos);
  EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
  EXPECT_EQ(positions.front(), 0);
  EXPECT_EQ(positions.back(), max_pos);
  for (int64_t p = 0; p < 4096; ++p) EXPECT_EQ(positions[p], p);
  for (int64_t p = max_pos - 4095; p <= max_pos; ++p)
    EXPECT_TRUE(std::binary_search(positions.begin(), positions.end(), p)) << p;
  // 0..4095, 4096 in each bin 2^12..2^19, 2^20..max_pos (4), the last 4096
  // (4096 - 4 - 32 new: 32 of bin 2^19's samples fall among them).
  EXPECT_EQ(positions.size(), 40928u);

  ExplainOptions o = frequencies_only();
  o.precision = true;
  o.max_pos = max_pos;
  const Explanation e = explain_ok(parse_ok("name: s\nhead_dim: 8\n"), o);
  ASSERT_TRUE(e.precision);
  EXPECT_TRUE(e.precision->sampled);
  EXPECT_EQ(e.precision->positions_checked, static_cast<int64_t>(positions.size()));
  EXPECT_EQ(e.precision->by_position.size(), 21u);
  EXPECT_EQ(e.precision->by_position.back().last, max_pos);
}

TEST(ExplainPrecision, RoundsToTheFormats) {
  EXPECT_EQ(lowering::round_to_format(1.0 + 0x1p-8, 8, -126), 1.0);            // tie: to even
  EXPECT_EQ(lowering::round_to_format(1.0 + 3 * 0x1p-8, 8, -126), 1.0 + 0x1p-6);  // tie: to even, up
  EXPECT_EQ(lowering::round_to_format(-0.7, 11, -14), static_cast<double>(static_cast<_Float16>(-0.7)));
  EXPECT_EQ(lowering::round_to_format(3e-6, 11, -14), static_cast<double>(static_cast<_Float16>(3e-6)));  // subnormal
  EXPECT_EQ(lowering::round_to_format(0.0, 8, -126), 0.0);
}

TEST(ExplainDefaults, MaxPosIsTheExtendedContextOrMore) {
  EXPECT_EQ(default_max_pos(parse_ok("name: s\nhead_dim: 8\n")), 131072);
  EXPECT_EQ(default_max_pos(parse_ok("name: s\nhead_dim: 8\nscaling: {type: yarn, factor: 40, original_max_position: 4096}\n")),
            163840);
  EXPECT_EQ(default_max_pos(parse_ok("name: s\nhead_dim: 8\nscaling: {type: llama3, factor: 8, original_max_position: 8192}\n")),
            131072);
  const Explanation e = explain_ok(parse_ok("name: s\nhead_dim: 8\n"), frequencies_only());
  EXPECT_EQ(e.max_pos, 131072);
  EXPECT_EQ(e.context, 131072);
  EXPECT_STREQ(e.context_source, "max_pos");
}

TEST(ExplainOtherEncodings, SinusoidalAlibiLearnedAndCallTimeFrequencies) {
  for (const auto& [form, second] : {std::pair{"interleaved", 1}, {"roformer", 5}}) {
    const Explanation e = explain_ok(
        parse_ok(std::string("name: s\nencoding: sinusoidal\ndim: 10\ntable_form: ") + form + "\n"), frequencies_only());
    ASSERT_EQ(e.pairs.size(), 5u);
    EXPECT_EQ(e.pairs[0].columns, (std::pair<int, int>{0, second}));
    EXPECT_DOUBLE_EQ(e.pairs[2].inv_freq, std::pow(10000.0, -4.0 / 10));
  }
  const Explanation odd = explain_ok(parse_ok("name: s\nencoding: sinusoidal\ndim: 9\ntable_form: roformer\n"));
  EXPECT_EQ(odd.pairs.back().columns, (std::pair<int, int>{4, -1}));  // sin column 4, no cos column
  ASSERT_TRUE(odd.precision);

  const Explanation alibi = explain_ok(parse_ok("name: s\nencoding: alibi\nnum_heads: 8\n"));
  EXPECT_EQ(alibi.alibi_slopes, ref::reference_alibi_slopes(8));
  EXPECT_EQ(alibi.alibi_slopes.front(), 0.5);
  EXPECT_TRUE(alibi.pairs.empty());
  EXPECT_FALSE(alibi.precision);

  const Explanation learned = explain_ok(parse_ok("name: s\nencoding: learned\ndim: 16\n"));
  EXPECT_TRUE(learned.pairs.empty());
  EXPECT_FALSE(learned.precision);
  ASSERT_EQ(learned.notes.size(), 1u);

  const Explanation runtime = explain_ok(parse_ok("name: s\nhead_dim: 8\nfrequency: {scheme: runtime}\n"));
  EXPECT_TRUE(runtime.pairs.empty());
  EXPECT_FALSE(runtime.precision);
  EXPECT_NE(runtime.notes.at(0).find("given with each call"), std::string::npos);
}

TEST(ExplainOptionsCheck, RefusesOutOfRange) {
  const RopeSpec spec = parse_ok("name: s\nhead_dim: 8\n");
  ExplainOptions o;
  o.max_pos = 0;
  EXPECT_FALSE(explain(spec, o).ok());
  o.max_pos = (int64_t{1} << 32) + 1;
  EXPECT_FALSE(explain(spec, o).ok());
  o.max_pos = 10;
  o.seq_len = 0;
  const Result<Explanation> r = explain(spec, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors()[0].message, "--seq-len (0) must be >= 1");
}

TEST(ExplainJson, ContractKeysFirst) {
  ExplainOptions o;
  o.max_pos = 100;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(explanation_json(explain_ok(
      parse_ok("name: s\nhead_dim: 8\npositions: explicit\naxes: {sections: [2, 2]}\n"
               "scaling: {type: llama3, factor: 8, original_max_position: 64}\n"), o)));
  const std::vector<std::string> contract = {"name", "encoding", "rotary_dim", "attention_factor",
                                             "attention_factor_source", "original_max_position", "pairs", "precision"};
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  ASSERT_GE(keys.size(), contract.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + contract.size()), contract);
  EXPECT_EQ(j["encoding"], "rope");
  EXPECT_EQ(j["original_max_position"], 64);
  const std::vector<std::string> pair_keys = {"index", "inv_freq", "inv_freq_unscaled", "wavelength", "regime", "axis"};
  for (const std::string& k : pair_keys) EXPECT_TRUE(j["pairs"][0].contains(k)) << k;
  EXPECT_EQ(j["pairs"][0]["regime"], "kept");
  EXPECT_EQ(j["pairs"][3]["axis"], 1);
  for (const char* k : {"max_pos", "f32_angle", "bf16_table", "f16_table", "rope_gen"})
    EXPECT_TRUE(j["precision"].contains(k)) << k;
  EXPECT_TRUE(j["precision"]["rope_gen"].is_null());
  EXPECT_EQ(j["precision"]["max_pos"], 100);

  const nlohmann::json none = nlohmann::json::parse(explanation_json(explain_ok(parse_ok("name: s\nencoding: learned\ndim: 4\n"))));
  EXPECT_TRUE(none["original_max_position"].is_null());
  EXPECT_TRUE(none["precision"].is_null());
  EXPECT_TRUE(none["pairs"].empty());
}

}  // namespace
}  // namespace ropegen
