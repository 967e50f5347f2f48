// call/fp8_checks.cpp: output_dtype fp8 calls (out_q and out_k uint8 codes,
// out of place, forward only, q_scale and k_scale finite and > 0), and the
// scales refused, by name, where a spec writes no codes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "call/prepare_call.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

RopeSpec spec_from(const std::string& text) { return parse_spec(text, "test").value(); }

const RopeSpec kFp8 = spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\noutput_dtype: fp8_e4m3\n");
const RopeSpec kPlain = spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\n");

std::string messages(const RopeSpec& spec, const Call& call) {
  const Result<call::PreparedCall> p = call::prepare_call(spec, call);
  return p ? "" : format(p.errors());
}

class Fp8Outputs : public ::testing::Test {
 protected:
  // q [1, 3, 2, 8] and k [1, 3, 1, 8] in bf16, their codes in uint8.
  Call call() {
    Call c;
    c.q = Tensor::dense(q_.data(), ElementType::BFloat16, {1, 3, 2, 8});
    c.k = Tensor::dense(k_.data(), ElementType::BFloat16, {1, 3, 1, 8});
    c.out_q = Tensor::dense(out_q_.data(), ElementType::UInt8, {1, 3, 2, 8});
    c.out_k = Tensor::dense(out_k_.data(), ElementType::UInt8, {1, 3, 1, 8});
    return c;
  }
  std::vector<uint16_t> q_ = std::vector<uint16_t>(48), k_ = std::vector<uint16_t>(24);
  std::vector<uint8_t> out_q_ = std::vector<uint8_t>(48), out_k_ = std::vector<uint8_t>(24);
};

TEST_F(Fp8Outputs, CodesOutOfPlaceWithScalesPass) {
  Call c = call();
  c.q_scale = 0.25f, c.k_scale = 3.0f;
  const Result<call::PreparedCall> p = call::prepare_call(kFp8, c);
  ASSERT_TRUE(p) << format(p.errors());
  EXPECT_EQ(p->scalars[abi::Arg::QScale].f32, 0.25f);
  EXPECT_EQ(p->scalars[abi::Arg::KScale].f32, 3.0f);
  EXPECT_EQ(call::prepare_call(kFp8, call())->scalars[abi::Arg::QScale].f32, 1.0f);  // absent: 1
}

TEST_F(Fp8Outputs, InPlaceAndSpecDtypeOutputsAreRefused) {
  Call c = call();
  c.out_q.reset(), c.out_k.reset();
  EXPECT_EQ(messages(kFp8, c),
            "out_q: error: the spec's output_dtype is fp8_e4m3: pass out_q, a uint8 tensor shaped like q for the codes "
            "(q keeps its dtype; not in place)\n"
            "out_k: error: the spec's output_dtype is fp8_e4m3: pass out_k, a uint8 tensor shaped like k for the codes "
            "(k keeps its dtype; not in place)\n");
  c = call();
  c.out_q = c.q;
  EXPECT_EQ(messages(kFp8, c),
            "out_q: error: out_q has dtype bfloat16 but uint8 (the spec's output_dtype is fp8_e4m3, whose codes are "
            "stored as uint8)\n");
}

// Backward is the inverse rotation into codes, but not through a norm.
TEST_F(Fp8Outputs, BackwardIsTheInverseRotationButNotThroughANorm) {
  Call c = call();
  c.backward = true;
  EXPECT_EQ(messages(kFp8, c), "");
  const RopeSpec normed =
      spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\noutput_dtype: fp8_e4m3\nqk_norm: {eps: 1.0e-6, "
                "weight: none}\n");
  EXPECT_EQ(messages(normed, c),
            "backward: error: a spec with output_dtype fp8_e4m3 and qk_norm has no backward kernel: its outputs are "
            "codes (the gradient is the same spec's without output_dtype)\n");
}

// output_quant: out_scales shaped as q with head_dim / group last, for q alone.
TEST_F(Fp8Outputs, OutputQuantTakesOutScalesForQAlone) {
  const RopeSpec quant =
      spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\noutput_dtype: fp8_e4m3\noutput_quant: {group: 4}\n");
  std::vector<float> scales(12);
  Call c = call();
  c.k.reset(), c.out_k.reset();
  EXPECT_EQ(messages(quant, c),
            "out_scales: error: the spec has `output_quant: {group: 4}`: pass out_scales, float32 shaped as q with "
            "head_dim / group = 2 in the last dim\n");
  c.out_scales = Tensor::dense(scales.data(), ElementType::Float32, {1, 3, 2, 2});
  EXPECT_EQ(messages(quant, c), "");
  c.out_scales = Tensor::dense(scales.data(), ElementType::Float32, {1, 3, 4});
  EXPECT_EQ(messages(quant, c),
            "out_scales: error: out_scales has shape (1, 3, 4) but must be q's with head_dim / group = 2 in the last "
            "dim: (1, 3, 2, 2)\n");
  c = call();
  c.out_scales = Tensor::dense(scales.data(), ElementType::Float32, {1, 3, 2, 2});
  EXPECT_EQ(messages(quant, c),
            "k: error: this spec's output_quant quantizes q alone (DeepSeek-V4's attention output): leave k out\n");
  EXPECT_EQ(messages(kFp8, c),
            "out_scales: error: out_scales is for specs with `output_quant` (per-group scales of fp8 outputs)\n");
  // Specs without fp8 outputs refuse it too (the fuzzer found it taken there, as a view without data).
  Call plain;
  plain.q = c.q;
  plain.out_scales = c.out_scales;
  EXPECT_EQ(messages(kPlain, plain),
            "out_scales: error: out_scales is for specs with `output_quant` (per-group scales of fp8 outputs)\n");
}

TEST_F(Fp8Outputs, ScalesAreFiniteAndPositiveAndOnlyWhereCodesAre) {
  Call c = call();
  c.q_scale = 0.0f, c.k_scale = NAN;
  EXPECT_EQ(messages(kFp8, c),
            "q_scale: error: q_scale (0) must be finite and > 0: out_q holds the fp8_e4m3 codes of x / q_scale\n"
            "k_scale: error: k_scale (nan) must be finite and > 0: out_k holds the fp8_e4m3 codes of x / k_scale\n");
  c = call();
  c.q_scale = INFINITY;
  EXPECT_EQ(messages(kFp8, c),
            "q_scale: error: q_scale (inf) must be finite and > 0: out_q holds the fp8_e4m3 codes of x / q_scale\n");
  Call plain;
  plain.q = c.q, plain.k = c.k;
  plain.q_scale = 1.0f, plain.k_scale = 1.0f;
  EXPECT_EQ(messages(kPlain, plain),
            "q_scale: error: q_scale is for specs with output_dtype fp8_e4m3 | fp8_e5m2; this spec's outputs are "
            "bfloat16: leave q_scale out\n"
            "k_scale: error: k_scale is for fp8 KV caches (and output_dtype fp8); this spec has no kv_cache section\n");
}

}  // namespace
}  // namespace ropegen
