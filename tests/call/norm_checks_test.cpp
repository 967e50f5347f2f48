// call/norm_checks.cpp: qk_norm's weights, q_norm_weight and k_norm_weight,
// each checked by name ([head_dim] in the spec's dtype, k_norm_weight
// with k), and refused by specs that take none; its backward's saved
// inputs (gradient_checks.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "call/prepare_call.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

RopeSpec spec_from(const std::string& text) { return parse_spec(text, "test").value(); }

const RopeSpec kNorm = spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\nqk_norm: {eps: 1.0e-6}\n");

std::string messages(const RopeSpec& spec, const Call& call) {
  const Result<call::PreparedCall> p = call::prepare_call(spec, call);
  return p ? "" : format(p.errors());
}

class NormWeights : public ::testing::Test {
 protected:
  // q [1, 3, 2, 8] and k [1, 3, 1, 8] in bf16, with both weights.
  Call call(ElementType type = ElementType::BFloat16) {
    Call c;
    c.q = Tensor::dense(q_.data(), type, {1, 3, 2, 8});
    c.k = Tensor::dense(k_.data(), type, {1, 3, 1, 8});
    c.q_norm_weight = Tensor::dense(wq_.data(), type, {8});
    c.k_norm_weight = Tensor::dense(wk_.data(), type, {8});
    return c;
  }
  std::vector<float> q_ = std::vector<float>(48), k_ = std::vector<float>(24), wq_ = std::vector<float>(8),
                     wk_ = std::vector<float>(8);
};

TEST_F(NormWeights, GivenRightTheyPass) { EXPECT_EQ(messages(kNorm, call()), ""); }

TEST_F(NormWeights, MissingOnesAreNamed) {
  Call c = call();
  c.q_norm_weight.reset();
  EXPECT_EQ(messages(kNorm, c),
            "q_norm_weight: error: the spec has `qk_norm: {weight: per_head}`: pass "
            "q_norm_weight, shaped (8,) in the spec's dtype or "
            "float32\n");
  c = call();
  c.k_norm_weight.reset();
  EXPECT_EQ(messages(kNorm, c),
            "k_norm_weight: error: the spec has `qk_norm: {weight: per_head}`: pass "
            "k_norm_weight, shaped (8,) in the spec's dtype or "
            "float32\n");
  c = call();
  c.k.reset();
  EXPECT_EQ(messages(kNorm, c), "k_norm_weight: error: k_norm_weight is given without k\n");
  c.k_norm_weight.reset();
  EXPECT_EQ(messages(kNorm, c), "");  // q alone
}

TEST_F(NormWeights, ShapeAndDtype) {
  Call c = call();
  c.q_norm_weight = Tensor::dense(wq_.data(), ElementType::BFloat16, {4});
  EXPECT_EQ(messages(kNorm, c), "q_norm_weight: error: q_norm_weight has shape (4,) but must be (8,) (head_dim)\n");
  c = call();
  c.k_norm_weight = Tensor::dense(wk_.data(), ElementType::BFloat16, {2, 4});
  EXPECT_EQ(messages(kNorm, c), "k_norm_weight: error: k_norm_weight has shape (2, 4) but must be (8,) (head_dim)\n");
  // The spec's dtype or float32 (mixed precision), both weights alike.
  c = call();
  c.q_norm_weight = Tensor::dense(wq_.data(), ElementType::Float32, {8});
  EXPECT_EQ(messages(kNorm, c),
            "k_norm_weight: error: k_norm_weight has dtype bfloat16 but q_norm_weight float32: "
            "pass both in one dtype\n");
  c.k_norm_weight = Tensor::dense(wk_.data(), ElementType::Float32, {8});
  EXPECT_EQ(messages(kNorm, c), "");
  EXPECT_TRUE(kernel_variant(kNorm, c).float32_norm_weights);
  c.q_norm_weight = Tensor::dense(wq_.data(), ElementType::Float16, {8});
  c.k_norm_weight = Tensor::dense(wk_.data(), ElementType::Float16, {8});
  EXPECT_EQ(messages(kNorm, c),
            "q_norm_weight: error: q_norm_weight has dtype float16 but the spec's dtype (bfloat16) or float32\n"
            "k_norm_weight: error: k_norm_weight has dtype float16 but the spec's dtype (bfloat16) or float32\n");
  EXPECT_FALSE(kernel_variant(kNorm, call()).float32_norm_weights);
}

TEST_F(NormWeights, RefusedBySpecsWithoutThem) {
  const RopeSpec none = spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\nqk_norm: {eps: 1.0e-6, weight: none}\n");
  Call c = call();
  c.k_norm_weight.reset();
  EXPECT_EQ(messages(none, c), "q_norm_weight: error: q_norm_weight is for specs with `qk_norm: {weight: per_head}`; "
                               "this spec normalises without a weight (weight: none)\n");
  const RopeSpec plain = spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\n");
  c = call();
  c.q_norm_weight.reset();
  EXPECT_EQ(messages(plain, c), "k_norm_weight: error: k_norm_weight is for specs with `qk_norm: {weight: per_head}`; "
                                "this spec has no qk_norm\n");
}

// The backward reads the forward's inputs (saved_q, saved_k) as well as
// the weights, and writes the weights' gradients (d_q_norm_weight,
// d_k_norm_weight), out of place.
TEST_F(NormWeights, BackwardNeedsTheForwardInputsAndTheWeightsGradients) {
  Call c = call();
  c.backward = true;
  EXPECT_EQ(messages(kNorm, c),
            "d_q_norm_weight: error: the backward of a spec with `qk_norm: {weight: per_head}` writes "
            "dL/d(q_norm_weight): pass d_q_norm_weight, float32 (8,)\n"
            "d_k_norm_weight: error: the backward of k with a spec with `qk_norm: {weight: per_head}` writes "
            "dL/d(k_norm_weight): pass d_k_norm_weight, float32 (8,)\n"
            "saved_q: error: this backward needs the forward input saved_q (shaped (1, 3, 2, 8)) for the norm's "
            "gradient (qk_norm)\n"
            "saved_k: error: this backward needs the forward input saved_k (shaped (1, 3, 1, 8)) for the norm's "
            "gradient (qk_norm)\n");
  // Apart from q and k, which the call rotates.
  std::vector<float> saved_q(48), saved_k(24), out_q(48), out_k(24), d_wq(8), d_wk(8);
  c.saved_q = Tensor::dense(saved_q.data(), ElementType::BFloat16, {1, 3, 2, 8});
  c.saved_k = Tensor::dense(saved_k.data(), ElementType::BFloat16, {1, 3, 1, 8});
  c.d_q_norm_weight = Tensor::dense(d_wq.data(), ElementType::Float32, {8});
  c.d_k_norm_weight = Tensor::dense(d_wk.data(), ElementType::Float32, {8});
  EXPECT_EQ(messages(kNorm, c),
            "out_q: error: the backward of a spec with `qk_norm: {weight: per_head}` reads q (and k) again for the "
            "weights' gradients: it cannot run in place; pass out_q (and out_k)\n");
  c.out_q = Tensor::dense(out_q.data(), ElementType::BFloat16, {1, 3, 2, 8});
  c.out_k = Tensor::dense(out_k.data(), ElementType::BFloat16, {1, 3, 1, 8});
  EXPECT_EQ(messages(kNorm, c), "");
  c.saved_k = Tensor::dense(saved_k.data(), ElementType::BFloat16, {1, 3, 8});
  c.d_k_norm_weight = Tensor::dense(d_wk.data(), ElementType::Float32, {4});
  EXPECT_EQ(messages(kNorm, c),
            "d_k_norm_weight: error: d_k_norm_weight has shape (4,) but must be (8,) (head_dim)\n"
            "saved_k: error: saved_k has shape (1, 3, 8) but its gradient k has (1, 3, 1, 8): they must match\n");
  c.d_k_norm_weight = Tensor::dense(d_wk.data(), ElementType::BFloat16, {8});
  c.saved_k = Tensor::dense(saved_k.data(), ElementType::BFloat16, {1, 3, 1, 8});
  EXPECT_EQ(messages(kNorm, c),
            "d_k_norm_weight: error: d_k_norm_weight has dtype bfloat16 but float32 (d_k_norm_weight is float32 "
            "whatever the spec's dtype)\n");
  c.backward = false;
  c.d_k_norm_weight.reset();
  EXPECT_EQ(messages(kNorm, c),
            "d_q_norm_weight: error: d_q_norm_weight (dL/d(q_norm_weight)) is only written by the backward of a spec "
            "with `qk_norm: {weight: per_head}`\n"
            "saved_q: error: saved forward inputs are only read by the backward of a spec with `frequency: {scheme: "
            "runtime}` (for dL/d(inv_freq)) or with qk_norm (for the norm's gradient)\n");
}

// Without a weight: the inputs' gradients alone, in place too.
TEST_F(NormWeights, BackwardWithoutAWeightRunsInPlace) {
  const RopeSpec none =
      spec_from("name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\nqk_norm: {eps: 1.0e-6, weight: none}\n");
  Call c = call();
  c.q_norm_weight.reset(), c.k_norm_weight.reset();
  c.backward = true;
  std::vector<float> saved_q(48), saved_k(24);
  c.saved_q = Tensor::dense(saved_q.data(), ElementType::BFloat16, {1, 3, 2, 8});
  c.saved_k = Tensor::dense(saved_k.data(), ElementType::BFloat16, {1, 3, 1, 8});
  EXPECT_EQ(messages(none, c), "");
}

TEST_F(NormWeights, BackwardWithRunTimeFrequenciesIsRefused) {
  const RopeSpec runtime = spec_from(
      "name: t\nhead_dim: 8\nrotary_dim: 4\ndtype: bf16\nfrequency: {scheme: runtime}\nqk_norm: {eps: 1.0e-6}\n");
  Call c = call();
  std::vector<float> freqs(2, 1.0f), d_freqs(2), saved_q(48), saved_k(24), d_wq(8), d_wk(8);
  c.freqs = Tensor::dense(freqs.data(), ElementType::Float32, {2});
  c.d_freqs = Tensor::dense(d_freqs.data(), ElementType::Float32, {2});
  c.backward = true;
  c.saved_q = Tensor::dense(saved_q.data(), ElementType::BFloat16, {1, 3, 2, 8});
  c.saved_k = Tensor::dense(saved_k.data(), ElementType::BFloat16, {1, 3, 1, 8});
  c.d_q_norm_weight = Tensor::dense(d_wq.data(), ElementType::Float32, {8});
  c.d_k_norm_weight = Tensor::dense(d_wk.data(), ElementType::Float32, {8});
  EXPECT_EQ(messages(runtime, c),
            "backward: error: the backward of a qk_norm spec with `frequency: {scheme: runtime}` is not generated "
            "(dL/d(inv_freq) of normed rows); train the frequencies without qk_norm or keep them fixed\n");
}

}  // namespace
}  // namespace ropegen
