// call/prepare_call.cpp on the cos/sin cache of `frequency: {scheme: table}`:
// every check names cos_sin_cache and says the fix; what passes is handed
// to the kernels as (c, position), cropped to the rows the call reads.
#include <gtest/gtest.h>

#include <vector>

#include "call/prepare_call.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

RopeSpec spec_from(const std::string& text) { return parse_spec(text, "test").value(); }

// rotary_dim 8 of head_dim 12: the cache is [max_pos, 8].
const RopeSpec kTable = spec_from("name: t\nhead_dim: 12\nrotary_dim: 8\nfrequency: {scheme: table}\n");
const RopeSpec kTableIds = spec_from("name: t\nhead_dim: 12\nrotary_dim: 8\nlayout: thd\npositions: explicit\n"
                                     "frequency: {scheme: table}\n");

std::string messages(const RopeSpec& spec, const Call& call) {
  const Result<call::PreparedCall> p = call::prepare_call(spec, call);
  return p ? "" : format(p.errors());
}

class CosSinCacheCall : public ::testing::Test {
 protected:
  // q [1, S, 2, 12] from offset `offset`, with a dense cache of `rows` rows.
  Call implicit(int64_t S, int64_t offset, int64_t rows) {
    q_.assign(S * 2 * 12, 0.0f);
    cache_.assign(rows * 8, 0.5f);
    Call c;
    c.q = Tensor::dense(q_.data(), ElementType::Float32, {1, S, 2, 12});
    c.offset = offset;
    c.cos_sin_cache = Tensor::dense(cache_.data(), ElementType::Float32, {rows, 8});
    return c;
  }
  std::vector<float> q_, cache_;
};

TEST_F(CosSinCacheCall, MissingOrUnwanted) {
  Call c = implicit(3, 0, 4);
  c.cos_sin_cache.reset();
  EXPECT_EQ(messages(kTable, c),
            "cos_sin_cache: error: the spec has `frequency: {scheme: table}`: pass cos_sin_cache, float32 shaped "
            "(max_pos, 8) (row p: cos of the 4 pairs at position p, then their sin)\n");
  c = implicit(3, 0, 4);
  EXPECT_EQ(messages(spec_from("name: l\nhead_dim: 12\nrotary_dim: 8\n"), c),
            "cos_sin_cache: error: cos_sin_cache is for specs with `frequency: {scheme: table}`; this spec computes its "
            "cos and sin\n");
  EXPECT_EQ(messages(kTable, c), "");
}

TEST_F(CosSinCacheCall, Float32WhateverTheSpecsDtype) {
  const RopeSpec bf16 = spec_from("name: t\nhead_dim: 12\nrotary_dim: 8\ndtype: bf16\nfrequency: {scheme: table}\n");
  std::vector<uint16_t> q(3 * 2 * 12), cache16(4 * 8);
  Call c = implicit(3, 0, 4);
  c.q = Tensor::dense(q.data(), ElementType::BFloat16, {1, 3, 2, 12});
  EXPECT_EQ(messages(bf16, c), "");
  c.cos_sin_cache = Tensor::dense(cache16.data(), ElementType::BFloat16, {4, 8});
  EXPECT_EQ(messages(bf16, c),
            "cos_sin_cache: error: cos_sin_cache has dtype bfloat16 but float32 (cos_sin_cache is "
            "float32 whatever the spec's dtype)\n");
}

TEST_F(CosSinCacheCall, ShapeAndStrides) {
  Call c = implicit(3, 0, 4);
  const std::string want_shape = "but must be (max_pos, 8) (rotary_dim = 8), spanning at most 2^31-1 elements\n";
  c.cos_sin_cache = Tensor::dense(cache_.data(), ElementType::Float32, {8, 4});  // [cos | sin] of 2 pairs: half the columns
  EXPECT_EQ(messages(kTable, c), "cos_sin_cache: error: cos_sin_cache has shape (8, 4) " + want_shape);
  c.cos_sin_cache = Tensor::dense(cache_.data(), ElementType::Float32, {32});
  EXPECT_EQ(messages(kTable, c), "cos_sin_cache: error: cos_sin_cache has shape (32,) " + want_shape);
  c.cos_sin_cache = Tensor::dense(cache_.data(), ElementType::Float32, {0, 8});
  EXPECT_EQ(messages(kTable, c), "cos_sin_cache: error: cos_sin_cache has shape (0, 8) " + want_shape);
  c.cos_sin_cache = Tensor::strided(cache_.data(), ElementType::Float32, {int64_t{1} << 28, 8}, {8, 1});
  EXPECT_EQ(messages(kTable, c), "cos_sin_cache: error: cos_sin_cache has shape (268435456, 8) " + want_shape);
  c.cos_sin_cache = Tensor::strided(cache_.data(), ElementType::Float32, {2, 8}, {16, 2});
  EXPECT_EQ(messages(kTable, c), "cos_sin_cache: error: cos_sin_cache's last dim must be contiguous (stride 1, not 2); "
                                 "its rows may be any distance apart\n");
  c.cos_sin_cache = Tensor::strided(cache_.data(), ElementType::Float32, {3, 8}, {12, 1});  // rows 12 apart: fine
  EXPECT_EQ(messages(kTable, c), "");
}

// Implicit positions: offset + S tokens need offset + S rows.
TEST_F(CosSinCacheCall, EveryPositionHasARow) {
  EXPECT_EQ(messages(kTable, implicit(3, 5, 8)), "");
  EXPECT_EQ(messages(kTable, implicit(3, 6, 8)),
            "cos_sin_cache: error: position (offset + index) 8 is outside cos_sin_cache: it has 8 rows (positions 0..7), "
            "the offset is 6; pass a longer cache or smaller positions\n");
  // Packed sequences restart at every start: the longest decides.
  Call c = implicit(1, 2, 5);
  std::vector<float> q(7 * 2 * 12);
  std::vector<int32_t> cu = {0, 3, 7};  // a sequence of 4 tokens: positions 2..5
  c.q = Tensor::dense(q.data(), ElementType::Float32, {7, 2, 12});
  c.cu_seqlens = Tensor::dense(cu.data(), ElementType::Int32, {3});
  const RopeSpec thd = spec_from("name: t\nhead_dim: 12\nrotary_dim: 8\nlayout: thd\nfrequency: {scheme: table}\n");
  EXPECT_EQ(messages(thd, c),
            "cos_sin_cache: error: position (offset + index) 5 is outside cos_sin_cache: it has 5 rows (positions 0..4), "
            "the offset is 2; pass a longer cache or smaller positions\n");
  cache_.assign(6 * 8, 0.5f);
  c.cos_sin_cache = Tensor::dense(cache_.data(), ElementType::Float32, {6, 8});
  EXPECT_EQ(messages(thd, c), "");

  // Explicit ids, int64 too; the largest is checked, wherever it is.
  std::vector<float> q3(3 * 2 * 12);
  std::vector<int64_t> ids = {0, int64_t{1} << 31, 2};
  Call e;
  e.q = Tensor::dense(q3.data(), ElementType::Float32, {3, 2, 12});
  e.positions = Tensor::dense(ids.data(), ElementType::Int64, {3});
  e.cos_sin_cache = Tensor::dense(cache_.data(), ElementType::Float32, {6, 8});
  EXPECT_EQ(messages(kTableIds, e),
            "cos_sin_cache: error: position id 2147483648 is outside cos_sin_cache: it has 6 rows (positions 0..5); "
            "pass a longer cache or smaller positions\n");
  ids[1] = 5;
  EXPECT_EQ(messages(kTableIds, e), "");
  // int32 ids, dense (scanned as one array) and strided (every other one):
  // the strided view reads 0, 4 and 9, never the 7 between.
  std::vector<int32_t> ids32 = {0, 7, 4, 7, 9};
  e.positions = Tensor::dense(ids32.data(), ElementType::Int32, {3});
  EXPECT_EQ(messages(kTableIds, e),
            "cos_sin_cache: error: position id 7 is outside cos_sin_cache: it has 6 rows (positions 0..5); "
            "pass a longer cache or smaller positions\n");
  e.positions = Tensor::strided(ids32.data(), ElementType::Int32, {3}, {2});
  EXPECT_EQ(messages(kTableIds, e),
            "cos_sin_cache: error: position id 9 is outside cos_sin_cache: it has 6 rows (positions 0..5); "
            "pass a longer cache or smaller positions\n");
  ids32[4] = 5;
  EXPECT_EQ(messages(kTableIds, e), "");
}

// The kernels are handed (c, position), only the rows up to the largest
// position read (GPU targets stage what they are handed).
TEST_F(CosSinCacheCall, KernelsGetTheRowsTheCallReads) {
  Call c = implicit(3, 2, 100);
  c.cos_sin_cache = Tensor::strided(cache_.data(), ElementType::Float32, {10, 8}, {10, 1});
  const Result<call::PreparedCall> p = call::prepare_call(kTable, c);
  ASSERT_TRUE(p.ok()) << format(p.errors());
  const call::View& v = (*p)[abi::Arg::CosSinCache];
  EXPECT_EQ(v.dims, 2);
  EXPECT_EQ(v.data, cache_.data());
  EXPECT_EQ(v.extent[0], 8);
  EXPECT_EQ(v.extent[1], 5);  // positions 2, 3, 4
  EXPECT_EQ(v.stride[0], 1);
  EXPECT_EQ(v.stride[1], 10);
}

// An output over the cache is refused like any overlap.
TEST_F(CosSinCacheCall, OutputsMayNotOverlapIt) {
  Call c = implicit(1, 0, 4);
  std::vector<float> shared(2 * 12 + 4 * 8);
  c.q = Tensor::dense(shared.data(), ElementType::Float32, {1, 1, 2, 12});
  c.out_q = Tensor::dense(shared.data() + 8, ElementType::Float32, {1, 1, 2, 12});
  c.cos_sin_cache = Tensor::dense(shared.data() + 24, ElementType::Float32, {4, 8});
  c.q = Tensor::dense(q_.data(), ElementType::Float32, {1, 1, 2, 12});
  EXPECT_EQ(messages(kTable, c),
            "out_q: error: out_q overlaps cos_sin_cache in memory: an output may only be exactly its own input (in "
            "place: same data, shape and strides) and must share no memory with any other tensor of the call\n");
}

}  // namespace
}  // namespace ropegen
