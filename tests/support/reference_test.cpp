// The float64 reference against the peers' own outputs (golden vectors).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "ropegen/spec_io.h"
#include "support/golden.h"
#include "support/reference.h"

namespace ropegen {
namespace {

// Peers rotate in float32: their angle error grows with the position.
double tolerance(const test::GoldenCase& c, const test::GoldenTensor& t) {
  double max_abs = 0;
  for (double v : t.data) max_abs = std::max(max_abs, std::abs(v));
  return (2e-6 + 2e-7 * static_cast<double>(c.max_position())) * std::max(1.0, max_abs);
}

void expect_close(const test::GoldenTensor& got, const test::GoldenTensor& want, double tol, const char* what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.data.size(); ++i)
    if (std::abs(got.data[i] - want.data[i]) > worst) worst = std::abs(got.data[i] - want.data[i]), at = i;
  EXPECT_LE(worst, tol) << what << ": worst difference at flat index " << at;
}

TEST(ReferenceGolden, RotationMatchesEveryPeerCase) {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden_cases()) {
    if (!c.has_tensors()) continue;
    Result<RopeSpec> spec = parse_spec(c.spec, c.name);
    if (!spec.ok()) {
      std::printf("[ SKIPPED  ] %s: spec v1 cannot express it yet: %s", c.name.c_str(), format(spec.errors()).c_str());
      continue;
    }
    SCOPED_TRACE(c.name + " (" + c.peer + ")");
    const ref::Tensor q = ref::reference_apply(*spec, {c.q->shape, c.q->data}, false, c.call());
    expect_close({q.shape, q.data}, *c.out_q, tolerance(c, *c.out_q), "q");
    if (c.k) {
      const ref::Tensor k = ref::reference_apply(*spec, {c.k->shape, c.k->data}, true, c.call());
      expect_close({k.shape, k.data}, *c.out_k, tolerance(c, *c.out_k), "k");
    }
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

// The tolerance above must be able to fail: a wrong pairing or a dropped
// attention factor is caught.
TEST(ReferenceGolden, ToleranceCatchesWrongPairingAndMissingAttentionFactor) {
  for (const test::GoldenCase& c : test::load_golden_cases()) {
    if (c.name != "hf_llama_yarn" && c.name != "hf_llama_default") continue;
    RopeSpec spec = *parse_spec(c.spec, c.name);
    if (c.name == "hf_llama_default") spec.pairing = Pairing::Interleaved;
    else spec.scaling.attention_factor = 1.0;
    const ref::Tensor q = ref::reference_apply(spec, {c.q->shape, c.q->data}, false, c.call());
    double worst = 0;
    for (size_t i = 0; i < q.data.size(); ++i) worst = std::max(worst, std::abs(q.data[i] - c.out_q->data[i]));
    EXPECT_GT(worst, 10 * tolerance(c, *c.out_q)) << c.name;
  }
}

// ---- data/encodings: multi-axis and run-time-frequency RoPE, backward, tables, sinusoidal, learned, ALiBi ----

using Outputs = std::map<std::string, ref::Tensor>;

ref::Tensor as_ref(const test::GoldenTensor& t) { return {t.shape, t.data}; }

// The reference's rope outputs: rotated q/k, or their gradients and, with
// run-time frequencies, the frequency gradient summed over q and k (with
// qk_norm weights, the weights' gradients).
Outputs rope_outputs(const RopeSpec& spec, const test::EncodingCase& c, const ref::Call& call) {
  Outputs out;
  std::vector<double> d_freq(spec.rotary_dim / 2, 0.0);
  for (const std::string which : {"q", "k"}) {
    const test::GoldenTensor* x = c.input(which);
    if (!x) continue;
    const bool is_key = which == "k";
    if (c.command == "apply") {
      out["out_" + which] = ref::reference_apply(spec, as_ref(*x), is_key, call);
      continue;
    }
    const test::GoldenTensor* saved = c.input("saved_" + which);
    const ref::Tensor saved_x = saved ? as_ref(*saved) : ref::Tensor{};
    ref::Gradients g = ref::reference_backward(spec, as_ref(*x), saved ? &saved_x : nullptr, is_key, call);
    out["out_" + which] = std::move(g.dx);
    for (size_t i = 0; i < g.d_inv_freq.size(); ++i) d_freq[i] += g.d_inv_freq[i];
    if (!g.d_norm_weight.empty())
      out["out_" + which + "_norm_weight"] = {{static_cast<int64_t>(g.d_norm_weight.size())}, g.d_norm_weight};
  }
  if (c.command == "backward" && spec.frequency.scheme == FrequencyScheme::Runtime)
    out["out_freqs"] = {{static_cast<int64_t>(d_freq.size())}, d_freq};
  return out;
}

// What `rope-gen apply|table` is to produce for the case, by the reference.
Outputs reference_outputs(const RopeSpec& spec, const test::EncodingCase& c) {
  const ref::Call call = c.call();
  if (c.command == "table") {
    if (spec.encoding != Encoding::Alibi) return {{"out", ref::reference_table(spec, call)}};
    const std::vector<double> slopes = ref::reference_alibi_slopes(spec.num_heads);
    return {{"out", {{spec.num_heads}, slopes}}};
  }
  switch (spec.encoding) {
    case Encoding::Alibi: return {{"out", ref::reference_alibi(spec, as_ref(*c.input("x")), call.offset)}};
    case Encoding::Sinusoidal:
    case Encoding::Learned: return {{"out", ref::reference_add_positions(spec, as_ref(*c.input("x")), call)}};
    case Encoding::Rope: break;
  }
  return rope_outputs(spec, c, call);
}

// Worst |reference - peer| relative to max(1, max |peer|) over every output.
double worst_relative(const Outputs& got, const test::EncodingCase& c) {
  EXPECT_EQ(got.size(), c.outputs.size()) << "outputs";
  double worst = 0;
  for (const auto& [name, want] : c.outputs) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << "the reference yields no " << name;
      continue;
    }
    EXPECT_EQ(it->second.shape, want.shape) << name;
    if (it->second.data.size() != want.data.size()) continue;
    double max_abs = 1;
    for (double v : want.data) max_abs = std::max(max_abs, std::abs(v));
    for (size_t i = 0; i < want.data.size(); ++i)
      worst = std::max(worst, std::abs(it->second.data[i] - want.data[i]) / max_abs);
  }
  return worst;
}

// The peers compute in float32 (angles of positions < 64, sums of < 100
// terms; the float64 ones -- RoFormer/XLM tables, seed 002's slopes and
// ALiBi bias -- round once to float32): every case meets 1e-5 relative.
constexpr double kEncodingTolerance = 1e-5;

RopeSpec parsed(const test::EncodingCase& c) {
  Result<RopeSpec> spec = parse_spec(c.spec, c.name);
  if (!spec.ok()) throw std::runtime_error(c.name + ": the spec does not parse: " + format(spec.errors()));
  return *spec;
}

TEST(ReferenceGolden, EveryEncodingsCase) {
  const std::vector<test::EncodingCase> cases = test::load_encoding_cases();
  for (const test::EncodingCase& c : cases) {
    SCOPED_TRACE(c.name + " (" + c.peer + ")");
    const double worst = worst_relative(reference_outputs(parsed(c), c), c);
    EXPECT_LE(worst, kEncodingTolerance);
    std::printf("[          ] %-40s worst relative %.1e\n", c.name.c_str(), worst);
  }
  EXPECT_GE(cases.size(), 40u);
}

// The tolerance must be able to fail: a wrong axis split, no per-axis
// restart, another table form or ALiBi form, xPos dropped from the backward
// are all caught.
TEST(ReferenceGolden, EncodingsToleranceCatchesWrongSemantics) {
  const std::map<std::string, void (*)(RopeSpec&)> wrong = {
      {"hf_qwen3_vl_mrope_interleaved", [](RopeSpec& s) { s.axes.interleaved = false; }},
      {"hf_qwen2_vl_mrope", [](RopeSpec& s) { s.axes.sections = {3, 3, 2}; }},
      {"hf_qwen2_vl_vision", [](RopeSpec& s) { s.axes.per_axis_frequencies = false; }},
      {"hf_roformer_sinusoidal_odd_sbd", [](RopeSpec& s) { s.table_form = TableForm::Interleaved; }},
      {"alibi_causal_offset5", [](RopeSpec& s) { s.alibi_form = AlibiForm::Symmetric; }},
      {"hf_bloom_alibi", [](RopeSpec& s) { s.alibi_form = AlibiForm::Causal; }},
      {"lr_xpos_backward", [](RopeSpec& s) { s.xpos.enabled = false; }},
      {"hf_deepseek_v3_interleave_backward", [](RopeSpec& s) { s.output_pairing = Pairing::Interleaved; }},
  };
  int checked = 0;
  for (const test::EncodingCase& c : test::load_encoding_cases()) {
    auto it = wrong.find(c.name);
    if (it == wrong.end()) continue;
    RopeSpec spec = parsed(c);
    it->second(spec);
    EXPECT_GT(worst_relative(reference_outputs(spec, c), c), 10 * kEncodingTolerance) << c.name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(wrong.size()));
}

// fp8 codes: literal values of both formats (OCP e4m3fn and e5m2).
// ---- qk_norm's backward against central differences of its forward ----

// L = sum(upstream * forward(x, w)) for a partial, offset, interleaved-in /
// half-out spec with Gemma's 1 + w: dL/dx and dL/dw from reference_backward
// against (L(v + h) - L(v - h)) / 2h, one input value at a time.
TEST(ReferenceQkNorm, BackwardMatchesCentralDifferences) {
  const RopeSpec spec = *parse_spec(
      "name: t\nhead_dim: 10\nrotary_dim: 6\nrotary_offset: "
      "3\npairing: interleaved\noutput_pairing: half\n"
      "layout: bshd\npositions: implicit\nqk_norm: {type: "
      "rms_one_plus, eps: 1.0e-3, weight: per_head}\n",
      "t");
  const std::vector<int64_t> shape = {1, 2, 2, 10};
  ref::Tensor x{shape, {}}, upstream{shape, {}};
  for (int i = 0; i < 40; ++i) {
    x.data.push_back(std::sin(1.7 * i + 0.3) * (1 + i % 3));
    upstream.data.push_back(std::cos(0.9 * i - 0.2));
  }
  ref::Call call;
  call.offset = 5;
  for (int i = 0; i < 10; ++i) call.q_norm_weight.push_back(0.1 * i - 0.4);
  auto loss = [&](const ref::Tensor& input, const ref::Call& c) {
    const ref::Tensor y = ref::reference_apply(spec, input, false, c);
    double sum = 0;
    for (size_t i = 0; i < y.data.size(); ++i) sum += upstream.data[i] * y.data[i];
    return sum;
  };
  const ref::Gradients g = ref::reference_backward(spec, upstream, &x, false, call);
  const double h = 1e-6;
  for (size_t i = 0; i < x.data.size(); ++i) {
    ref::Tensor plus = x, minus = x;
    plus.data[i] += h, minus.data[i] -= h;
    EXPECT_NEAR(g.dx.data[i], (loss(plus, call) - loss(minus, call)) / (2 * h), 1e-7) << "dL/dx at " << i;
  }
  ASSERT_EQ(g.d_norm_weight.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    ref::Call plus = call, minus = call;
    plus.q_norm_weight[i] += h, minus.q_norm_weight[i] -= h;
    EXPECT_NEAR(g.d_norm_weight[i], (loss(x, plus) - loss(x, minus)) / (2 * h), 1e-7) << "dL/dw at " << i;
  }
}

TEST(ReferenceFp8, LiteralCodes) {
  const KvDType e4 = KvDType::Fp8E4m3, e5 = KvDType::Fp8E5m2;
  EXPECT_EQ(ref::fp8_value(e4, 0x7e), 448.0);
  EXPECT_TRUE(std::isnan(ref::fp8_value(e4, 0x7f)));
  EXPECT_EQ(ref::fp8_value(e4, 0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(ref::fp8_value(e4, 0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(ref::fp8_value(e4, 0xb8), -1.0);
  EXPECT_EQ(ref::fp8_value(e5, 0x7b), 57344.0);
  EXPECT_EQ(ref::fp8_value(e5, 0x7c), INFINITY);
  EXPECT_TRUE(std::isnan(ref::fp8_value(e5, 0x7d)));
  EXPECT_EQ(ref::fp8_value(e5, 0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(ref::fp8_value(e5, 0x3c), 1.0);

  EXPECT_EQ(ref::fp8_code(e4, 1.0f, 1.0f), 0x38);
  EXPECT_EQ(ref::fp8_code(e4, 448.0f, 1.0f), 0x7e);
  EXPECT_EQ(ref::fp8_code(e4, 1e9f, 1.0f), 0x7e);       // saturated
  EXPECT_EQ(ref::fp8_code(e4, -INFINITY, 1.0f), 0xfe);  // saturated
  EXPECT_EQ(ref::fp8_code(e4, NAN, 1.0f), 0x7f);
  EXPECT_EQ(ref::fp8_code(e4, -NAN, 1.0f), 0xff);
  EXPECT_EQ(ref::fp8_code(e4, -0.0f, 1.0f), 0x80);
  EXPECT_EQ(ref::fp8_code(e4, std::ldexp(1.0f, -10), 1.0f), 0x00);       // half the smallest subnormal: tie to 0
  EXPECT_EQ(ref::fp8_code(e4, 3 * std::ldexp(1.0f, -10), 1.0f), 0x02);   // 1.5 subnormal steps: tie to 2
  EXPECT_EQ(ref::fp8_code(e4, 15 * std::ldexp(1.0f, -10), 1.0f), 0x08);  // 7.5 steps: the smallest normal
  EXPECT_EQ(ref::fp8_code(e4, 1.0625f, 1.0f), 0x38);                     // between 1 and 1.125: tie to even
  EXPECT_EQ(ref::fp8_code(e4, 1.1875f, 1.0f), 0x3a);                     // between 1.125 and 1.25: tie to even
  EXPECT_EQ(ref::fp8_code(e4, 2.0f, 0.5f), 0x48);                        // 4 = x / scale
  EXPECT_EQ(ref::fp8_code(e4, 100.0f, 0.01f), 0x7e);                     // 10000 saturates
  EXPECT_EQ(ref::fp8_code(e5, 1e9f, 1.0f), 0x7b);
  EXPECT_EQ(ref::fp8_code(e5, -INFINITY, 1.0f), 0xfb);
  EXPECT_EQ(ref::fp8_code(e5, NAN, 1.0f), 0x7f);
  EXPECT_EQ(ref::fp8_code(e5, 1.125f, 1.0f), 0x3c);                      // between 1 and 1.25: tie to even
  EXPECT_EQ(ref::fp8_code(e5, std::ldexp(1.0f, -17), 1.0f), 0x00);
  EXPECT_EQ(ref::fp8_code(e5, -3 * std::ldexp(1.0f, -17), 1.0f), 0x82);
}

// torch's float8_e4m3fn / float8_e5m2 conversions of clamp(x / scale)
// (tests/golden/make_fp8_golden.py) give the reference's codes.
TEST(ReferenceFp8, MatchesTorchGolden) {
  std::ifstream in(test::golden_dir() + "/fp8/fp8_codes.json");
  ASSERT_TRUE(in) << "tests/golden/data/fp8/fp8_codes.json";
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::vector<uint32_t> bits = j["x_bits"].get<std::vector<uint32_t>>();
  const std::vector<float> scales = j["scales"].get<std::vector<float>>();
  int64_t checked = 0;
  for (auto [name, format] : {std::pair{"fp8_e4m3", KvDType::Fp8E4m3}, std::pair{"fp8_e5m2", KvDType::Fp8E5m2}})
    for (size_t s = 0; s < scales.size(); ++s) {
      const std::vector<int> codes = j["codes"][name][s].get<std::vector<int>>();
      ASSERT_EQ(codes.size(), bits.size());
      for (size_t i = 0; i < bits.size(); ++i) {
        float x;
        std::memcpy(&x, &bits[i], sizeof x);
        ASSERT_EQ(ref::fp8_code(format, x, scales[s]), codes[i])
            << name << " x " << x << " (bits " << std::hex << bits[i] << std::dec << ") scale " << scales[s];
        ++checked;
      }
    }
  EXPECT_GT(checked, 20000);
}

}  // namespace
}  // namespace ropegen
