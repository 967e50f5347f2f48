// call/prepare_call.cpp on the fused KV-cache append: every check names
// the argument (and the token) and says the fix; nothing out of range
// reaches a kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "call/prepare_call.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

RopeSpec spec_from(const std::string& text) { return parse_spec(text, "test").value(); }

const std::string kDims = "name: kv\nhead_dim: 8\nrotary_dim: 4\nlayout: thd\npositions: explicit\n";
const RopeSpec kPaged = spec_from(kDims + "kv_cache: {layout: paged_nhd, page_size: 4}\n");
const RopeSpec kHnd = spec_from(kDims + "kv_cache: {layout: paged_hnd, page_size: 4, dtype: bf16}\n");
const RopeSpec kSlots = spec_from(kDims + "kv_cache: {layout: contiguous}\n");

std::string messages(const RopeSpec& spec, const Call& call) {
  const Result<call::PreparedCall> p = call::prepare_call(spec, call);
  return p ? "" : format(p.errors());
}

// 4 tokens, q 2 heads, k and v 1 head, of two requests (3 at positions
// 4..6, 1 at position 0), 3 pages of 4 entries: request 0 has pages 2, 0,
// request 1 page 1.
class KvCacheCall : public ::testing::Test {
 protected:
  Call paged() {
    Call c;
    c.q = Tensor::dense(q_.data(), ElementType::Float32, {4, 2, 8});
    c.k = Tensor::dense(k_.data(), ElementType::Float32, {4, 1, 8});
    c.v = Tensor::dense(v_.data(), ElementType::Float32, {4, 1, 6});
    c.positions = Tensor::dense(positions_.data(), ElementType::Int32, {4});
    c.k_cache = Tensor::dense(k_cache_.data(), ElementType::Float32, {3, 4, 1, 8});
    c.v_cache = Tensor::dense(v_cache_.data(), ElementType::Float32, {3, 4, 1, 6});
    c.kv_indices = Tensor::dense(kv_indices_.data(), ElementType::Int32, {3});
    c.kv_indptr = Tensor::dense(kv_indptr_.data(), ElementType::Int32, {3});
    c.batch_indices = Tensor::dense(batch_indices_.data(), ElementType::Int32, {4});
    return c;
  }
  Call slots() {
    Call c = paged();
    c.kv_indices.reset(), c.kv_indptr.reset(), c.batch_indices.reset();
    c.k_cache = Tensor::dense(k_cache_.data(), ElementType::Float32, {12, 1, 8});
    c.v_cache = Tensor::dense(v_cache_.data(), ElementType::Float32, {12, 1, 6});
    c.slot_mapping = Tensor::dense(slot_mapping_.data(), ElementType::Int32, {4});
    return c;
  }
  std::vector<float> q_ = std::vector<float>(64), k_ = std::vector<float>(32), v_ = std::vector<float>(24);
  std::vector<float> k_cache_ = std::vector<float>(96), v_cache_ = std::vector<float>(72);
  std::vector<int32_t> positions_ = {4, 5, 6, 0}, kv_indices_ = {2, 0, 1}, kv_indptr_ = {0, 2, 3};
  std::vector<int32_t> batch_indices_ = {0, 0, 0, 1}, slot_mapping_ = {3, -1, 11, 0};
};

TEST_F(KvCacheCall, ValidCallsAndTheirViews) {
  EXPECT_EQ(messages(kPaged, paged()), "");
  EXPECT_EQ(messages(kSlots, slots()), "");
  Call mla = paged();
  mla.v.reset(), mla.v_cache.reset();
  const Result<call::PreparedCall> p = call::prepare_call(kPaged, mla);
  ASSERT_TRUE(p) << format(p.errors());
  EXPECT_FALSE(p->variant.with_k);  // no out_k: k is read, not written
  EXPECT_FALSE(p->variant.with_v);
  EXPECT_FALSE((*p)[abi::Arg::OutK].defined());
  // (d, h, entry, page) of [pages, page_size, Hk, D]
  EXPECT_EQ((*p)[abi::Arg::KCache].extent, (std::array<int64_t, 4>{8, 1, 4, 3}));
  EXPECT_EQ((*p)[abi::Arg::KCache].stride, (std::array<int64_t, 4>{1, 8, 8, 32}));
  batch_indices_[1] = -5;  // any negative index: not appended
  EXPECT_EQ(messages(kPaged, paged()), "");
}

TEST_F(KvCacheCall, MissingOrUnwantedArguments) {
  Call c = paged();
  c.k.reset();
  EXPECT_EQ(messages(kPaged, c), 
            "k: error: the spec appends to a KV cache: pass k ([T, Hk, head_dim]); it is rotated into k_cache\n");
  c = paged();
  c.k_cache.reset();
  EXPECT_EQ(messages(kPaged, c), 
            "k_cache: error: the spec appends to a KV cache: pass k_cache shaped (pages, 4, 1, 8) ([pages, page_size, Hk, D])\n");
  c = paged();
  c.out_k = c.k;
  EXPECT_EQ(messages(kPaged, c),
            "out_k: error: out_k is k (in place), but the cache rows are rotated from k as it came: pass a separate "
            "out_k, or leave out_k out (k is then not written)\n");
  c = paged();
  c.v_cache.reset();
  EXPECT_EQ(messages(kPaged, c), 
            "v_cache: error: v is given without v_cache: pass the cache v is appended to\n");
  c = paged();
  c.batch_indices.reset();
  c.slot_mapping = Tensor::dense(slot_mapping_.data(), ElementType::Int32, {4});
  EXPECT_EQ(messages(kPaged, c), 
            "batch_indices: error: the spec's kv_cache layout is paged_nhd: pass batch_indices (kv_indices, kv_indptr and batch_indices)\n"
            "slot_mapping: error: slot_mapping is for contiguous caches; the spec's kv_cache layout is paged_nhd (pass kv_indices, kv_indptr and batch_indices)\n");
  EXPECT_EQ(
      messages(spec_from(kDims), paged()),
      "v: error: v is for specs with a kv_cache section (the fused KV-cache append); this spec has none\n"
      "kv_indices: error: kv_indices is for specs with a kv_cache section (the fused KV-cache append); this spec has "
      "none\n"
      "kv_indptr: error: kv_indptr is for specs with a kv_cache section (the fused KV-cache append); this spec has "
      "none\n"
      "batch_indices: error: batch_indices is for specs with a kv_cache section (the fused KV-cache append); this spec "
      "has none\n"
      "k_cache: error: k_cache is for specs with a kv_cache section (the fused KV-cache append); this spec has none\n"
      "v_cache: error: v_cache is for specs with a kv_cache section (the fused KV-cache append); this spec has none\n");
}

TEST_F(KvCacheCall, ShapesAndDtypes) {
  Call c = paged();
  c.k_cache = Tensor::dense(k_cache_.data(), ElementType::Float32, {3, 1, 4, 8});  // hnd for an nhd spec
  EXPECT_EQ(messages(kPaged, c), 
            "k_cache: error: k_cache has shape (3, 1, 4, 8) but the spec's kv_cache layout paged_nhd needs (pages, 4, 1, 8) ([pages, page_size, Hk, D])\n");
  c = paged();
  c.v = Tensor::dense(v_.data(), ElementType::Float32, {4, 2, 3});
  EXPECT_EQ(messages(kPaged, c), 
            "v: error: v has shape (4, 2, 3) but must be (T, Hk, Dv) = (4, 1, Dv): k's tokens and heads, any row size\n");
  c = paged();
  EXPECT_EQ(messages(kHnd, c), 
            "k_cache: error: k_cache has dtype float32 but bfloat16 (the spec's kv_cache dtype is bfloat16)\n"
            "v_cache: error: v_cache has dtype float32 but bfloat16 (the spec's kv_cache dtype is bfloat16)\n");
  c = paged();
  c.batch_indices = Tensor::dense(v_.data(), ElementType::Float32, {4});
  EXPECT_EQ(messages(kPaged, c), 
            "batch_indices: error: batch_indices has dtype float32: cache indices are int32 (or int64 on the host)\n");
}

// int64 indices (vLLM's) are checked as they are, then narrowed: a value
// past int32 is refused, never wrapped onto another entry (2^32 + 7 would
// have become slot 7, -2^32 + 5 slot 5); negatives stay "not appended".
TEST_F(KvCacheCall, Int64IndicesAreCheckedBeforeTheyAreNarrowed) {
  std::vector<int64_t> to = {3, -(int64_t{1} << 32) + 5, 11, 0};
  Call c = slots();
  c.slot_mapping = Tensor::dense(to.data(), ElementType::Int64, {4});
  Result<call::PreparedCall> p = call::prepare_call(kSlots, c);
  ASSERT_TRUE(p.ok()) << format(p.errors());
  const call::View& narrowed = (*p)[abi::Arg::SlotMapping];
  ASSERT_EQ(narrowed.type, ElementType::Int32);
  const auto* values = static_cast<const int32_t*>(narrowed.data);
  EXPECT_EQ(std::vector<int32_t>(values, values + 4), (std::vector<int32_t>{3, -1, 11, 0}));
  to[1] = (int64_t{1} << 32) + 7;
  EXPECT_EQ(messages(kSlots, c),
            "slot_mapping: error: slot_mapping[1] is 4294967303, outside k_cache's 12 slots (0..11; negative: not "
            "appended)\n");

  std::vector<int64_t> pages = {2, 0, (int64_t{1} << 32) + 1}, starts = {0, 2, 3}, requests = {0, 0, 0, 1};
  c = paged();
  c.kv_indices = Tensor::dense(pages.data(), ElementType::Int64, {3});
  c.kv_indptr = Tensor::dense(starts.data(), ElementType::Int64, {3});
  c.batch_indices = Tensor::dense(requests.data(), ElementType::Int64, {4});
  EXPECT_EQ(messages(kPaged, c), "kv_indices: error: kv_indices[2] is 4294967297, outside k_cache's 3 pages (0..2)\n");
  pages[2] = 1;
  p = call::prepare_call(kPaged, c);
  ASSERT_TRUE(p.ok()) << format(p.errors());
  EXPECT_EQ(static_cast<const int32_t*>((*p)[abi::Arg::KvIndices].data)[2], 1);
  requests[3] = -(int64_t{1} << 32);  // not appended, as -1
  p = call::prepare_call(kPaged, c);
  ASSERT_TRUE(p.ok()) << format(p.errors());
  EXPECT_EQ(static_cast<const int32_t*>((*p)[abi::Arg::BatchIndices].data)[3], -1);
  // A device call's kernels read the indices as given: int32 only.
  c.q->device = c.k->device = c.v->device = c.positions->device = c.k_cache->device = c.v_cache->device =
      c.kv_indices->device = c.kv_indptr->device = c.batch_indices->device = {DeviceType::CUDA, 0};
  EXPECT_EQ(messages(kPaged, c),
            "kv_indices: error: kv_indices has dtype int64 but int32 (a device call's cache indices are int32: the "
            "kernels read them as given)\n"
            "kv_indptr: error: kv_indptr has dtype int64 but int32 (a device call's cache indices are int32: the "
            "kernels read them as given)\n"
            "batch_indices: error: batch_indices has dtype int64 but int32 (a device call's cache indices are int32: "
            "the kernels read them as given)\n");
}

TEST_F(KvCacheCall, PageTableIndicesInRange) {
  kv_indptr_ = {0, 3, 2};
  EXPECT_EQ(messages(kPaged, paged()), 
            "kv_indptr: error: kv_indptr[2] is 2: kv_indptr must never decrease and stay within kv_indices (0..3)\n");
  kv_indptr_ = {0, 2, 4};
  EXPECT_EQ(messages(kPaged, paged()), 
            "kv_indptr: error: kv_indptr[2] is 4: kv_indptr must never decrease and stay within kv_indices (0..3)\n");
  kv_indptr_ = {0, 2, 3}, kv_indices_ = {2, 3, 1};
  EXPECT_EQ(messages(kPaged, paged()), 
            "kv_indices: error: kv_indices[1] is 3, outside k_cache's 3 pages (0..2)\n");
  kv_indices_ = {2, 0, 1}, batch_indices_ = {0, 0, 2, 1};
  EXPECT_EQ(messages(kPaged, paged()), 
            "batch_indices: error: batch_indices[2] is 2 but kv_indptr has 2 requests (0..1; negative: not appended)\n");
  batch_indices_ = {0, 0, 0, 1}, positions_ = {4, 5, 6, 4};  // request 1 has one page: positions 0..3
  EXPECT_EQ(messages(kPaged, paged()), 
            "positions: error: token 3 (request 1) is at position 4, in page 1 of its request, but the request has 1 pages (kv_indptr[1..2] = 2..3, page_size 4)\n");
  positions_ = {4, 5, 4, 0};
  EXPECT_EQ(messages(kPaged, paged()), 
            "batch_indices: error: tokens 0 and 2 both go to page 0, entry 0: each cache entry takes at most one token of a call\n");
}

TEST_F(KvCacheCall, SlotsInRangeAndDistinct) {
  slot_mapping_ = {3, -1, 12, 0};
  EXPECT_EQ(messages(kSlots, slots()), 
            "slot_mapping: error: slot_mapping[2] is 12, outside k_cache's 12 slots (0..11; negative: not appended)\n");
  slot_mapping_ = {3, -1, 0, 0};
  EXPECT_EQ(messages(kSlots, slots()), 
            "slot_mapping: error: tokens 2 and 3 both go to slot 0: each cache entry takes at most one token of a call\n");
}

// fp8 caches: uint8 codes, scales finite and > 0 (absent: 1); scales are
// refused for other caches and without a kv_cache section; v_scale needs v.
TEST_F(KvCacheCall, Fp8CachesAndTheirScales) {
  const RopeSpec fp8 = spec_from(kDims + "kv_cache: {layout: paged_nhd, page_size: 4, dtype: fp8_e4m3}\n");
  std::vector<uint8_t> k_codes(96), v_codes(72);
  auto fp8_call = [&] {
    Call c = paged();
    c.k_cache = Tensor::dense(k_codes.data(), ElementType::UInt8, {3, 4, 1, 8});
    c.v_cache = Tensor::dense(v_codes.data(), ElementType::UInt8, {3, 4, 1, 6});
    return c;
  };
  EXPECT_EQ(messages(fp8, fp8_call()), "");
  Call c = fp8_call();
  c.k_scale = 0.5f, c.v_scale = 2.0f;
  const Result<call::PreparedCall> p = call::prepare_call(fp8, c);
  ASSERT_TRUE(p) << format(p.errors());
  EXPECT_EQ(p->scalars[abi::Arg::KScale].f32, 0.5f);
  EXPECT_EQ(p->scalars[abi::Arg::VScale].f32, 2.0f);
  EXPECT_EQ(call::prepare_call(fp8, fp8_call())->scalars[abi::Arg::KScale].f32, 1.0f);

  c = fp8_call();
  c.k_scale = 0.0f, c.v_scale = NAN;
  EXPECT_EQ(messages(fp8, c),
            "k_scale: error: k_scale (0) must be finite and > 0: the k cache holds the fp8_e4m3 codes of x / k_scale\n"
            "v_scale: error: v_scale (nan) must be finite and > 0: the v cache holds the fp8_e4m3 codes of x / v_scale\n");
  c = fp8_call();
  c.k_scale = -1.0f, c.v_scale = INFINITY;
  EXPECT_EQ(messages(fp8, c),
            "k_scale: error: k_scale (-1) must be finite and > 0: the k cache holds the fp8_e4m3 codes of x / k_scale\n"
            "v_scale: error: v_scale (inf) must be finite and > 0: the v cache holds the fp8_e4m3 codes of x / v_scale\n");
  c = fp8_call();
  c.v.reset(), c.v_cache.reset();
  c.v_scale = 1.0f;
  EXPECT_EQ(messages(fp8, c), "v_scale: error: v_scale is given without v: it scales v's rows in v_cache (pass v and "
                              "v_cache, or leave v_scale out)\n");
  c = paged();  // float32 caches
  EXPECT_EQ(messages(fp8, c),
            "k_cache: error: k_cache has dtype float32 but uint8 (the spec's kv_cache dtype is fp8_e4m3, whose codes "
            "are stored as uint8)\n"
            "v_cache: error: v_cache has dtype float32 but uint8 (the spec's kv_cache dtype is fp8_e4m3, whose codes "
            "are stored as uint8)\n");

  c = paged();
  c.k_scale = 1.0f;
  EXPECT_EQ(messages(kPaged, c),
            "k_scale: error: k_scale is for fp8 KV caches (and output_dtype fp8); the spec's "
            "kv_cache dtype float32 stores values as they are: leave k_scale out\n");
  Call plain;
  plain.q = c.q, plain.k = c.k, plain.positions = c.positions;
  plain.v_scale = 1.0f;
  EXPECT_EQ(messages(spec_from(kDims), plain),
            "v_scale: error: v_scale is for fp8 KV caches; this spec has no kv_cache section\n");
}

// cache_positions (paged): where tokens go when they rotate elsewhere; the
// kernels read the placement as int32, from cache_positions or positions.
TEST_F(KvCacheCall, CachePositionsPlaceTokens) {
  std::vector<int32_t> placed = {0, 1, 2, 3};
  Call c = paged();
  positions_ = {100, 101, 102, 7};  // rotation only: request 1 has one page, but token 3 goes to its entry 3
  c.cache_positions = Tensor::dense(placed.data(), ElementType::Int32, {4});
  const Result<call::PreparedCall> p = call::prepare_call(kPaged, c);
  ASSERT_TRUE(p) << format(p.errors());
  EXPECT_EQ(p->owned_cache_positions, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ((*p)[abi::Arg::CachePositions].extent[0], 4);
  positions_ = {4, 5, 6, 0};  // without cache_positions, positions place the tokens
  const Result<call::PreparedCall> q = call::prepare_call(kPaged, paged());
  ASSERT_TRUE(q) << format(q.errors());
  EXPECT_EQ(q->owned_cache_positions, (std::vector<int32_t>{4, 5, 6, 0}));

  positions_ = {100, 101, 102, 7};
  placed = {0, 1, 2, 4};
  EXPECT_EQ(messages(kPaged, c), "cache_positions: error: token 3 (request 1) is at cache position 4, in page 1 of its "
                                 "request, but the request has 1 pages (kv_indptr[1..2] = 2..3, page_size 4)\n");
  placed = {0, -1, 2, 3};
  EXPECT_EQ(messages(kPaged, c), "cache_positions: error: cache_positions[1] is -1: a token's place in its request's "
                                 "cache is >= 0\n");
  placed = {0, 1, 2, 3};
  c.cache_positions = Tensor::dense(placed.data(), ElementType::Int32, {3});
  EXPECT_EQ(messages(kPaged, c), "cache_positions: error: cache_positions has shape (3,) but must be (4,) (where each "
                                 "token goes in its request's cache)\n");
  std::vector<int64_t> wide = {0, 1, 2, 3};
  c.cache_positions = Tensor::dense(wide.data(), ElementType::Int64, {4});
  EXPECT_EQ(messages(kPaged, c), "");  // int64 on the host: checked as given, then narrowed
  wide[1] = (int64_t{1} << 32) + 1;    // 1 once wrapped to int32
  EXPECT_NE(messages(kPaged, c).find("cache_positions: error: token 1 (request 0) is at cache position 4294967297"),
            std::string::npos)
      << messages(kPaged, c);
  Call s = slots();
  s.cache_positions = Tensor::dense(placed.data(), ElementType::Int32, {4});
  EXPECT_EQ(messages(kSlots, s), "cache_positions: error: cache_positions is for paged caches; the spec's kv_cache layout "
                                 "is contiguous (slot_mapping places the tokens)\n");
}

}  // namespace
}  // namespace ropegen
