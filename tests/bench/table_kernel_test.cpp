// bench/'s hand-written table kernel computes what rope-gen's kernel
// computes (same spec, same inputs), so `make bench` compares like with
// like: float32 within 1e-6 of the pair's magnitude, bf16 within one ulp.
// Both of its paths (AVX-512 where the CPU has AVX512-BF16, portable), in
// place and out of place, on one thread and split over the worker pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/table_kernel.h"
#include "bench/worker_pool.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"

namespace ropegen::bench {
namespace {

constexpr int64_t kBatch = 5, kSeq = 3, kQHeads = 4, kKHeads = 2, kDim = 128;

struct Case {
  const char* dtype;
  const char* pairing;
  bool in_place;
  int threads;
  bool avx512;
};

std::string name(const Case& c) {
  return std::string(c.dtype) + "_" + c.pairing + (c.in_place ? "_in_place" : "_out_of_place") + "_" +
         std::to_string(c.threads) + "t" + (c.avx512 ? "_avx512" : "_portable");
}

void PrintTo(const Case& c, std::ostream* os) { *os << name(c); }

// The llama3-8B frequencies with explicit positions.
RopeSpec spec_for(const Case& c) {
  const std::string yaml = std::string("name: table_check\nhead_dim: 128\nlayout: bshd\npositions: explicit\n") +
                           "dtype: " + c.dtype + "\npairing: " + c.pairing +
                           "\nfrequency:\n  scheme: lang\n  theta: 500000\nscaling:\n  type: llama3\n  factor: 8\n"
                           "  low_freq_factor: 1\n  high_freq_factor: 4\n  original_max_position: 8192\n";
  Result<RopeSpec> spec = parse_spec(yaml, "table_check.yaml");
  EXPECT_TRUE(spec) << (spec ? "" : spec.errors()[0].message);
  return *spec;
}

float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t bf16_bits(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
// bf16 bits on one integer line, so ulps are differences.
int ordered(uint16_t b) { return b & 0x8000 ? -(b & 0x7fff) : b; }

class BenchTableKernel : public ::testing::TestWithParam<Case> {};

TEST_P(BenchTableKernel, MatchesRopeGensKernel) {
  const Case c = GetParam();
  const RopeSpec spec = spec_for(c);
  const bool bf16 = spec.dtype == DType::BF16;
  const int64_t elem = bf16 ? 2 : 4, q_elems = kBatch * kSeq * kQHeads * kDim, k_elems = kBatch * kSeq * kKHeads * kDim;

  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int32_t> position(0, 8191);
  std::vector<float> values(q_elems + k_elems);
  for (float& v : values) v = normal(rng);
  std::vector<char> input((q_elems + k_elems) * elem);
  for (size_t i = 0; i < values.size(); ++i) {
    if (bf16) {
      const uint16_t b = bf16_bits(values[i]);
      std::memcpy(&input[i * 2], &b, 2), values[i] = bf16_value(b);
    } else {
      std::memcpy(&input[i * 4], &values[i], 4);
    }
  }
  std::vector<int32_t> ids(kBatch * kSeq);
  for (int32_t& id : ids) id = position(rng);
  ids[0] = 8191, ids[1] = 0;

  // rope-gen's kernel, out of place.
  std::vector<char> expected(input.size());
  const ElementType type = bf16 ? ElementType::BFloat16 : ElementType::Float32;
  Call call;
  call.q = Tensor::dense(input.data(), type, {kBatch, kSeq, kQHeads, kDim});
  call.k = Tensor::dense(input.data() + q_elems * elem, type, {kBatch, kSeq, kKHeads, kDim});
  call.out_q = Tensor::dense(expected.data(), type, {kBatch, kSeq, kQHeads, kDim});
  call.out_k = Tensor::dense(expected.data() + q_elems * elem, type, {kBatch, kSeq, kKHeads, kDim});
  call.positions = Tensor::dense(ids.data(), ElementType::Int32, {kBatch, kSeq});
  const Status ran = Runtime::process().run(spec, call);
  ASSERT_TRUE(ran) << ran.errors()[0].message;

  // The table kernel.
  Result<TableKernel> table = TableKernel::make(spec, 8192, c.avx512);
  ASSERT_TRUE(table) << table.errors()[0].message;
  if (c.avx512 && !table->avx512()) GTEST_SKIP() << "this CPU has no AVX512-BF16; the portable path is checked";
  std::vector<char> got = input;
  std::vector<char> out(c.in_place ? 0 : input.size());
  char* result = c.in_place ? got.data() : out.data();
  TableTokens t;
  t.q = got.data(), t.out_q = result, t.q_heads = kQHeads;
  t.k = got.data() + q_elems * elem, t.out_k = result + q_elems * elem, t.k_heads = kKHeads;
  t.positions = ids.data(), t.tokens = kBatch * kSeq;
  WorkerPool pool(c.threads);
  pool.run([&](int i) { table->run(t, t.tokens * i / c.threads, t.tokens * (i + 1) / c.threads); });

  double worst = 0;
  int mismatches = 0;
  for (int64_t i = 0; i < q_elems + k_elems; ++i) {
    const int64_t j = i % kDim, row = i - j;
    const int64_t partner = row + (std::string(c.pairing) == "half" ? (j + kDim / 2) % kDim : j ^ 1);
    if (bf16) {
      uint16_t a, b;
      std::memcpy(&a, &result[i * 2], 2), std::memcpy(&b, &expected[i * 2], 2);
      const int ulps = std::abs(ordered(a) - ordered(b));
      worst = std::max<double>(worst, ulps);
      if (ulps > 1 && ++mismatches <= 5) ADD_FAILURE() << "element " << i << ": " << ulps << " bf16 ulps apart";
    } else {
      float a, b;
      std::memcpy(&a, &result[i * 4], 4), std::memcpy(&b, &expected[i * 4], 4);
      const double scale = std::max(1.0, double{std::fabs(values[i]) + std::fabs(values[partner])});
      const double error = std::fabs(double{a} - b) / scale;
      worst = std::max(worst, error);
      if (!(error <= 1e-6) && ++mismatches <= 5) ADD_FAILURE() << "element " << i << ": " << a << " vs " << b;
    }
  }
  EXPECT_EQ(mismatches, 0);
  std::ostringstream worst_text;
  worst_text << std::scientific << worst;
  RecordProperty("worst", worst_text.str());
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char* dtype : {"f32", "bf16"})
    for (const char* pairing : {"half", "interleaved"})
      for (const bool in_place : {false, true})
        for (const bool avx512 : {true, false}) all.push_back({dtype, pairing, in_place, in_place ? 2 : 1, avx512});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Cases, BenchTableKernel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return name(info.param); });

// Names what it does not cover instead of computing something else.
TEST(BenchTableKernelScope, RefusesWhatItDoesNotCover) {
  Result<RopeSpec> partial = parse_spec("name: p\nhead_dim: 128\nrotary_dim: 64\n", "p.yaml");
  ASSERT_TRUE(partial);
  Result<TableKernel> k = TableKernel::make(*partial, 16);
  ASSERT_FALSE(k);
  EXPECT_EQ(k.errors()[0].message, "the table kernel covers full rotary dims read and written in one pairing only");
}

}  // namespace
}  // namespace ropegen::bench
