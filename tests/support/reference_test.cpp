// The float64 reference against the peers' own outputs (golden vectors).
#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace ropegen
