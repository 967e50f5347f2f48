// The cos/sin cache against the independent reference: the values, and the
// way engines use it (x * cos + rotate_half(x) * sin) reproduces the rotation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ropegen/rope_table.h"
#include "ropegen/spec_io.h"
#include "support/reference.h"

namespace ropegen {
namespace {

RopeSpec spec_of(const std::string& text) {
  Result<RopeSpec> r = parse_spec(text, "t");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : format(r.errors()));
  return *r;
}

TEST(RopeTable, MatchesTheReferenceAndRotatesLikeIt) {
  for (const char* extra : {"", "scaling: {type: yarn, factor: 4, original_max_position: 64}\n",
                            "scaling: {type: dynamic, factor: 2, original_max_position: 16}\n",
                            "scaling: {type: longrope, factor: 8, original_max_position: 16, "
                            "short_factor: [1, 2, 3, 4], long_factor: [5, 6, 7, 8]}\n"}) {
    SCOPED_TRACE(extra);
    const RopeSpec spec = spec_of(std::string("name: t\nhead_dim: 10\nrotary_dim: 8\nlayout: thd\npositions: explicit\n") + extra);
    const std::vector<int64_t> positions = {0, 3, 17, 40, 1000};
    const RopeTable t = *rope_table(spec, positions);
    ASSERT_EQ(t.rows, 5);
    ASSERT_EQ(t.columns, 8);
    EXPECT_EQ(t.seq_len, 1001);

    // Rotating x with the table (HF/vLLM style) equals the reference rotation.
    std::mt19937 rng(5);
    std::normal_distribution<double> dist;
    ref::Tensor x{{5, 1, 10}, {}};
    for (int i = 0; i < 50; ++i) x.data.push_back(dist(rng));
    ref::Call call;
    call.positions = ref::Tensor{{5}, {0, 3, 17, 40, 1000}};
    const ref::Tensor want = ref::reference_apply(spec, x, false, call);
    for (int64_t row = 0; row < 5; ++row)
      for (int i = 0; i < 4; ++i) {
        const double c = t.values[row * 8 + i], s = t.values[row * 8 + 4 + i];
        const double a = x.data[row * 10 + i], b = x.data[row * 10 + 4 + i];
        EXPECT_NEAR(a * c - b * s, want.data[row * 10 + i], 2e-6);
        EXPECT_NEAR(b * c + a * s, want.data[row * 10 + 4 + i], 2e-6);
      }
  }
}

TEST(RopeTable, XposHasNoTable) {
  Result<RopeTable> r = rope_table(spec_of("name: t\nhead_dim: 8\nxpos: {}\n"), {0, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(format(r.errors()), "t: error: a spec with xpos has no cos/sin table: queries and keys are scaled differently\n");
}

}  // namespace
}  // namespace ropegen
