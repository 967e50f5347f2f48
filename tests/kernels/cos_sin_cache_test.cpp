// Frequency scheme table against the kernels that compute cos/sin.
//
// Given the computing kernel's own cos/sin as its cache, a `scheme: table`
// kernel must give the computing kernel's bits: the rotation is the same
// float32 arithmetic, only the source of cos/sin differs (any attention
// factor is in the cache, where the computing kernel multiplies it into
// cos/sin too). The cos/sin of a kernel are read off its outputs on (1, 0)
// pairs: out = (1 * c - 0 * s, 0 * c + 1 * s) = (c, s) exactly (c is never
// zero, and 0 * c carries s's sign when s is a zero).
//
// `rope-gen table` (ropegen::rope_table) writes cos/sin rounded once from
// float64, not the kernels' float32 polynomials: a table kernel given it is
// within a bound of the computing kernel, measured and checked below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "kernels/encoding_sweeps.h"
#include "kernels/gpu_parity.h"
#include "runtime/host_apply.h"
#include "runtime/host_tensor.h"
#include "ropegen/rope_table.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

using abi::Arg;

RopeSpec parse(const std::string& text) {
  Result<RopeSpec> spec = parse_spec(text, "case");
  if (!spec) throw std::invalid_argument(format(spec.errors()));
  return *spec;
}

runtime::ApplyResult run_spec(const std::string& spec, const runtime::ApplyRequest& r) {
  Result<runtime::ApplyResult> result = runtime::apply_on_host(parse(spec), r);
  if (!result) throw std::runtime_error(format(result.errors()));
  return std::move(result).value();
}

runtime::HostArray normal(std::vector<int64_t> shape, DType dtype, uint32_t seed) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> data(n);
  for (float& v : data) v = dist(gen);
  return runtime::HostArray::of_floats(std::move(shape), runtime::to_storage(data, dtype).to_float());
}

// The computing kernel's cos/sin for positions 0 .. rows-1 of a spec with
// rotary_dim `rotary` and these frequency keys: float32 [rows, rotary].
runtime::HostArray kernel_cache(const std::string& keys, int rotary, int64_t rows, int64_t seq_len) {
  const std::string spec = fmt::format("name: k\nhead_dim: {}\nlayout: thd\npositions: explicit\n{}", rotary, keys);
  runtime::ApplyRequest r;
  std::vector<float> q(rows * rotary, 0.0f);
  for (int64_t t = 0; t < rows; ++t)
    for (int i = 0; i < rotary / 2; ++i) q[t * rotary + i] = 1.0f;  // half pairing: (x_i, x_{i+R/2}) = (1, 0)
  r[Arg::Q] = runtime::HostArray::of_floats({rows, 1, rotary}, std::move(q));
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < rows; ++p) positions.push_back(p);
  r[Arg::Positions] = runtime::HostArray::of_ids({rows}, std::move(positions));
  r.seq_len = seq_len;
  return runtime::HostArray::of_floats({rows, rotary}, run_spec(spec, r).out_q());
}

// One comparison: `dims` (no frequency keys) computing with `keys`, and
// reading the cache; the same call otherwise.
struct IdentityCase {
  std::string dims, keys;
  std::vector<int64_t> q_shape;
  int k_heads = 0;                 // 0: q alone
  bool backward = false;
  std::optional<runtime::HostArray> positions;
  std::optional<std::vector<int64_t>> cu_seqlens;
  int64_t offset = 0, seq_len = 1, rows = 1;  // rows: positions 0 .. rows-1 in the cache

  std::string describe() const {
    return fmt::format("{}{}q [{}], k heads {}, backward {}, offset {}, rows {}", dims, keys, fmt::join(q_shape, ","),
                       k_heads, backward, offset, rows);
  }
};

// Units in the last place of a 16-bit dtype between two values it holds exactly.
int64_t ulp_distance(DType dtype, float a, float b) {
  auto ordered = [&](float v) -> int64_t {
    const auto bits = static_cast<int16_t>(dtype == DType::BF16 ? Halide::bfloat16_t(v).to_bits()
                                                                : Halide::float16_t(v).to_bits());
    return bits < 0 ? int64_t{INT16_MIN} - bits : bits;
  };
  return std::abs(ordered(a) - ordered(b));
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_same_bits(const IdentityCase& c) {
  SCOPED_TRACE(c.describe());
  const RopeSpec spec = parse(c.dims + c.keys);
  runtime::ApplyRequest r;
  r[Arg::Q] = normal(c.q_shape, spec.dtype, 1);
  if (c.k_heads) {
    std::vector<int64_t> k_shape = c.q_shape;
    k_shape[spec.layout == Layout::BHSD || spec.layout == Layout::THD ? 1 : 2] = c.k_heads;
    r[Arg::K] = normal(k_shape, spec.dtype, 2);
  }
  r.backward = c.backward;
  r[Arg::Positions] = c.positions;
  if (c.cu_seqlens)
    r[Arg::CuSeqlens] = runtime::HostArray::of_ids({static_cast<int64_t>(c.cu_seqlens->size())}, *c.cu_seqlens);
  r.offset = c.offset;
  r.seq_len = c.seq_len;
  const runtime::ApplyResult computed = run_spec(c.dims + c.keys, r);
  r[Arg::CosSinCache] = kernel_cache(c.keys, spec.rotary_dim, c.rows, c.seq_len);
  const runtime::ApplyResult read = run_spec(c.dims + "frequency: {scheme: table}\n", r);
  EXPECT_TRUE(same_bits(computed.out_q(), read.out_q())) << "q";
  if (c.k_heads) {
    EXPECT_TRUE(same_bits(computed[Arg::OutK]->floats, read[Arg::OutK]->floats)) << "k";
  }
  // Not vacuous: the outputs are rotations, not the inputs.
  EXPECT_FALSE(same_bits(computed.out_q(), r[Arg::Q]->floats));
}

runtime::HostArray ids(std::vector<int64_t> shape, int64_t limit, bool int64, uint32_t seed) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::mt19937 gen(seed);
  std::vector<int64_t> values;
  for (int64_t i = 0; i < n; ++i)
    values.push_back(i == 0 ? limit - 1 : std::uniform_int_distribution<int64_t>(0, limit - 1)(gen));
  return runtime::HostArray::of_ids(std::move(shape), std::move(values), int64);
}

const char* const kLlama3 = "frequency: {theta: 500000}\nscaling: {type: llama3, factor: 8, original_max_position: 8192}\n";
const char* const kYarn = "scaling: {type: yarn, factor: 4, original_max_position: 4096}\n";  // attention factor 1.139
const char* const kDeepSeekYarn =
    "scaling: {type: yarn, factor: 40, original_max_position: 4096, mscale: 1, mscale_all_dim: 0.5, beta_fast: 32}\n";
std::string longrope(int pairs, const char* policy) {
  std::vector<double> s, l;
  for (int i = 0; i < pairs; ++i) s.push_back(1.0 + 0.1 * i), l.push_back(2.0 + 0.5 * i);
  return fmt::format("scaling: {{type: longrope, factor: 32, original_max_position: 4096, policy: {}, "
                     "short_factor: [{}], long_factor: [{}]}}\n",
                     policy, fmt::join(s, ", "), fmt::join(l, ", "));
}

TEST(CosSinCache, KernelsOwnCosSinGiveTheComputingKernelsBits) {
  std::vector<IdentityCase> cases;
  IdentityCase c;
  // llama3, bf16, implicit positions past an offset, GQA; forward and backward.
  for (bool backward : {false, true}) {
    c = {};
    c.dims = "name: c\nhead_dim: 128\ndtype: bf16\n", c.keys = kLlama3;
    c.q_shape = {2, 9, 4, 128}, c.k_heads = 2, c.backward = backward, c.offset = 1000, c.seq_len = 1009, c.rows = 1009;
    cases.push_back(c);
  }
  // yarn (attention factor != 1), interleaved, f32, int64 ids to 70000 in thd.
  c = {};
  c.dims = "name: c\nhead_dim: 64\npairing: interleaved\nlayout: thd\npositions: explicit\n", c.keys = kYarn;
  c.q_shape = {11, 3, 64}, c.k_heads = 1, c.positions = ids({11}, 70000, true, 3), c.seq_len = 70000, c.rows = 70000;
  cases.push_back(c);
  // The same with int32 ids and f16.
  c.dims = "name: c\nhead_dim: 64\npairing: interleaved\nlayout: thd\npositions: explicit\ndtype: f16\n";
  c.positions = ids({11}, 70000, false, 4);
  cases.push_back(c);
  // longrope (both lists), partial rotary, sbhd, ids shared by the batch.
  for (const char* policy : {"long", "per_call"}) {
    c = {};
    c.dims = "name: c\nhead_dim: 20\nrotary_dim: 12\nrotary_offset: 4\nlayout: sbhd\npositions: explicit\n";
    c.keys = longrope(6, policy);
    c.q_shape = {5, 2, 3, 20}, c.k_heads = 3, c.positions = ids({5}, 5000, false, 5), c.seq_len = 5000, c.rows = 5000;
    cases.push_back(c);
  }
  // DeepSeek-V3: rope dims at the end, read interleaved, written half; thd
  // sequences; backward too.
  for (bool backward : {false, true}) {
    c = {};
    c.dims = "name: c\nhead_dim: 192\nrotary_dim: 64\nrotary_offset: 128\npairing: interleaved\noutput_pairing: half\n"
             "layout: thd\ndtype: bf16\n";
    c.keys = kDeepSeekYarn;
    c.q_shape = {9, 5, 192}, c.k_heads = 1, c.backward = backward, c.cu_seqlens = std::vector<int64_t>{0, 1, 6, 9};
    c.offset = 300, c.seq_len = 305, c.rows = 305;
    cases.push_back(c);
  }
  // Odd sizes: one pair, one token, one head; a rotary range of 17 pairs in bhsd.
  c = {};
  c.dims = "name: c\nhead_dim: 2\n", c.keys = "", c.q_shape = {1, 1, 1, 2}, c.offset = 7, c.rows = 8, c.seq_len = 8;
  cases.push_back(c);
  c = {};
  c.dims = "name: c\nhead_dim: 130\nrotary_dim: 34\nrotary_offset: 96\nlayout: bhsd\ndtype: f16\n", c.keys = kYarn;
  c.q_shape = {3, 5, 1, 130}, c.k_heads = 5, c.backward = true, c.rows = 1, c.seq_len = 1;
  cases.push_back(c);
  // Multi-axis: each pair reads its own axis's row (the cache is 1-D).
  c = {};
  c.dims = "name: c\nhead_dim: 16\npositions: explicit\naxes: {sections: [2, 3, 3]}\n", c.keys = "";
  c.q_shape = {2, 5, 3, 16}, c.k_heads = 1, c.positions = ids({2, 5, 3}, 4096, false, 6), c.seq_len = 4096, c.rows = 4096;
  cases.push_back(c);
  for (const IdentityCase& one : cases) expect_same_bits(one);
}

// A cache with rows further apart than rotary_dim (a view into a wider
// buffer), or in reverse order (a negative row stride), is read as the
// dense one.
TEST(CosSinCache, RowsAnyDistanceApart) {
  const RopeSpec spec = parse("name: c\nhead_dim: 16\nlayout: thd\npositions: explicit\nfrequency: {scheme: table}\n");
  const int64_t rows = 50, R = 16, T = 7;
  const runtime::HostArray dense = test::reference_cache("name: c\nhead_dim: 16\n" + std::string(kYarn), rows);
  std::vector<float> q = normal({T, 2, R}, DType::F32, 9).floats, out_dense(q.size()), out_wide(q.size()),
                     out_reversed(q.size());
  std::vector<int32_t> positions = {0, 49, 3, 17, 17, 48, 1};
  std::vector<float> wide(rows * (R + 5), -7.0f), reversed(rows * R);
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t c = 0; c < R; ++c) {
      wide[p * (R + 5) + c] = dense.floats[p * R + c];
      reversed[(rows - 1 - p) * R + c] = dense.floats[p * R + c];
    }
  auto run = [&](const Tensor& cache, std::vector<float>& out) {
    Call call;
    call.q = Tensor::dense(q.data(), ElementType::Float32, {T, 2, R});
    call.out_q = Tensor::dense(out.data(), ElementType::Float32, {T, 2, R});
    call.positions = Tensor::dense(positions.data(), ElementType::Int32, {T});
    call.cos_sin_cache = cache;
    const Status s = Runtime::process().run(spec, call);
    ASSERT_TRUE(s.ok()) << format(s.errors());
  };
  run(Tensor::dense(const_cast<float*>(dense.floats.data()), ElementType::Float32, {rows, R}), out_dense);
  run(Tensor::strided(wide.data(), ElementType::Float32, {rows, R}, {R + 5, 1}), out_wide);
  run(Tensor::strided(reversed.data() + (rows - 1) * R, ElementType::Float32, {rows, R}, {-R, 1}), out_reversed);
  EXPECT_TRUE(same_bits(out_dense, out_wide));
  EXPECT_TRUE(same_bits(out_dense, out_reversed));
  EXPECT_FALSE(same_bits(out_dense, q));
}

// `rope-gen table`'s cache (float64 cos/sin times the attention factor,
// rounded once) against the kernels' float32 polynomials (cos/sin within
// ~1.1e-7 of the truth, then times the attention factor in float32): the
// table kernel is within 4e-7 * attention factor * (|x0| + |x1|) of the
// computing kernel in float32 outputs, and f16 / bf16 outputs within that
// plus one unit of their last place (a rounding that falls the other way).
// Measured (printed), positions 0 .. 65535: 17-40% of f32 outputs differ,
// by at most 2.8e-7 x attention factor x (|x0| + |x1|); 0.002-0.02% of f16
// and bf16 outputs. In ulps the distance is unbounded: outputs near zero
// (cancellation) have tiny ulps.
TEST(CosSinCache, RopeGenTableIsWithinBoundsOfTheComputingKernel) {
  const int64_t rows = 65536;
  for (const char* keys : {kLlama3, kYarn, kDeepSeekYarn, ""})
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      const int R = 128, half = R / 2;
      const std::string dims = fmt::format("name: c\nhead_dim: {}\nlayout: thd\ndtype: {}\n", R, to_string(dtype));
      SCOPED_TRACE(dims + keys);
      const RopeSpec spec = parse(dims + keys);
      std::vector<int64_t> positions(rows);
      for (int64_t p = 0; p < rows; ++p) positions[p] = p;
      const Result<RopeTable> table = rope_table(spec, positions, rows);
      ASSERT_TRUE(table.ok()) << format(table.errors());
      runtime::ApplyRequest r;
      r[Arg::Q] = normal({rows, 1, R}, dtype, 11);
      r.seq_len = rows;
      const std::vector<float> computed = run_spec(dims + keys, r).out_q();
      r[Arg::CosSinCache] = runtime::HostArray::of_floats({rows, R}, table->values);
      const std::vector<float> read = run_spec(dims + "frequency: {scheme: table}\n", r).out_q();
      const double af = table->attention_factor;
      // 16-bit outputs may also round to neighbours: one unit of the dtype allowed on top.
      const int mantissa_bits = dtype == DType::BF16 ? 7 : dtype == DType::F16 ? 10 : 23;
      double worst = 0;  // (|difference| - rounding) / (attention factor * (|x0| + |x1|))
      int64_t differing = 0, worst_ulp = 0;
      for (int64_t t = 0; t < rows; ++t)
        for (int i = 0; i < R; ++i) {
          const int64_t at = t * R + i, pair = t * R + i % half;
          const double scale = af * (std::abs(r[Arg::Q]->floats[pair]) + std::abs(r[Arg::Q]->floats[pair + half]));
          const double diff = std::abs(static_cast<double>(computed[at]) - read[at]);
          if (diff == 0) continue;
          ++differing;
          const double larger = std::max(std::abs(computed[at]), std::abs(read[at]));
          const double rounding = dtype == DType::F32 ? 0
                                  : std::max(std::ldexp(1.0, std::ilogb(larger) - mantissa_bits),
                                             dtype == DType::F16 ? std::ldexp(1.0, -24) : 0.0);  // f16 subnormals
          worst = std::max(worst, std::max(0.0, diff - rounding) / scale);
          worst_ulp = std::max(worst_ulp, dtype == DType::F32 ? test::ulp_distance(computed[at], read[at])
                                                              : ulp_distance(dtype, computed[at], read[at]));
        }
      std::printf("%s%s: %.3g%% of outputs differ, by at most %.3g x attention factor x (|x0| + |x1|)%s; %lld ulp at most\n",
                  dims.c_str(), keys, 100.0 * differing / (rows * R), worst,
                  dtype == DType::F32 ? "" : " + 1 ulp", static_cast<long long>(worst_ulp));
      EXPECT_LE(worst, 4e-7);
    }
}

}  // namespace
}  // namespace ropegen
