// call/ on device calls (every tensor on one CUDA or Vulkan device):
// prepare_call checks what it can without reading a tensor, and the part
// views are device-only halide_buffer_ts over the caller's memory. The
// tensors here live in address space reserved with PROT_NONE: a read of
// any of them on the host would crash the test.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstdint>

#include "call/contract.h"
#include "call/parts.h"
#include "call/prepare_call.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

RopeSpec spec_from(const std::string& text) { return parse_spec(text, "test").value(); }

std::string messages(const RopeSpec& spec, const Call& call) {
  const Result<call::PreparedCall> p = call::prepare_call(spec, call);
  return p ? "" : format(p.errors());
}

constexpr Device kCuda{DeviceType::CUDA, 0};
constexpr Device kVulkan{DeviceType::Vulkan, 0};

// Any halide_device_interface_t: part views only carry the pointer.
const halide_device_interface_t kInterface{};

class DeviceCall : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = static_cast<uint8_t*>(mmap(nullptr, kBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    ASSERT_NE(base_, MAP_FAILED);
  }
  void TearDown() override { munmap(base_, kBytes); }
  // An address `offset` bytes into the unreadable range.
  void* at(int64_t offset) const { return base_ + offset; }

  static constexpr size_t kBytes = size_t{1} << 40;  // address space only
  uint8_t* base_ = nullptr;
};

const RopeSpec kBshd = spec_from("name: d\nhead_dim: 16\nrotary_dim: 8\nrotary_offset: 8\npositions: explicit\n"
                                 "dtype: bf16\n");

TEST_F(DeviceCall, TensorsShareOneDevice) {
  Call c;
  c.q = Tensor::dense(at(0), ElementType::BFloat16, {2, 3, 4, 16}, kCuda);
  c.positions = Tensor::dense(at(4096), ElementType::Int32, {2, 3});  // on the host
  EXPECT_EQ(messages(kBshd, c), "positions: error: positions is on cpu:0 but q is on cuda:0: a call's tensors share one "
                                "device\n");
  c.positions->device = kCuda;
  c.k = Tensor::dense(at(8192), ElementType::BFloat16, {2, 3, 1, 16}, Device{DeviceType::CUDA, 1});
  EXPECT_EQ(messages(kBshd, c), "k: error: k is on cuda:1 but q is on cuda:0: a call's tensors share one device\n"
                                "out_k: error: out_k is on cuda:1 but q is on cuda:0: a call's tensors share one "
                                "device\n");  // in place: out_k is k
  c.k->device = kVulkan;
  EXPECT_EQ(messages(kBshd, c), "k: error: k is on vulkan:0 but q is on cuda:0: a call's tensors share one device\n"
                                "out_k: error: out_k is on vulkan:0 but q is on cuda:0: a call's tensors share one "
                                "device\n");
  c.k->device = kCuda;
  EXPECT_EQ(messages(kBshd, c), "");
  // Shapes and dtypes are checked as on the host.
  c.positions = Tensor::dense(at(4096), ElementType::Float32, {2, 3}, kCuda);
  EXPECT_EQ(messages(kBshd, c), "positions: error: positions has dtype float32: ids must be int32 or int64\n");
}

// Positions, cu_seqlens, frequencies and the KV-cache indices are never
// read (they would crash here): their validity is the caller's.
TEST_F(DeviceCall, ValuesInDeviceMemoryAreNotRead) {
  Call c;
  c.q = Tensor::dense(at(0), ElementType::BFloat16, {2, 3, 4, 16}, kCuda);
  c.positions = Tensor::dense(at(4096), ElementType::Int64, {2, 3}, kCuda);
  const Result<call::PreparedCall> p = call::prepare_call(kBshd, c);
  ASSERT_TRUE(p) << format(p.errors());
  EXPECT_TRUE(p->on_device());
  EXPECT_FALSE(p->seq_len_known);  // not derived from the ids
  c.seq_len = 9;
  EXPECT_TRUE(call::prepare_call(kBshd, c)->seq_len_known);

  const RopeSpec runtime = spec_from("name: r\nhead_dim: 16\nlayout: thd\nfrequency: {scheme: runtime}\n");
  Call r;
  r.q = Tensor::dense(at(0), ElementType::Float32, {5, 2, 16}, kVulkan);
  r.cu_seqlens = Tensor::dense(at(4096), ElementType::Int32, {3}, kVulkan);
  r.freqs = Tensor::dense(at(8192), ElementType::Float32, {8}, kVulkan);
  EXPECT_EQ(messages(runtime, r), "");
  r.offset = -1;  // a host value: still checked
  EXPECT_EQ(messages(runtime, r), "offset: error: position (offset + index) -1 is negative: positions must be in "
                                  "0..2^32\n");

  const RopeSpec paged = spec_from("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                   "kv_cache: {layout: paged_nhd, page_size: 4}\n");
  Call kv;
  kv.q = Tensor::dense(at(0), ElementType::Float32, {4, 2, 8}, kCuda);
  kv.k = Tensor::dense(at(1 << 12), ElementType::Float32, {4, 1, 8}, kCuda);
  kv.positions = Tensor::dense(at(2 << 12), ElementType::Int32, {4}, kCuda);
  kv.k_cache = Tensor::dense(at(3 << 12), ElementType::Float32, {3, 4, 1, 8}, kCuda);
  kv.kv_indices = Tensor::dense(at(4 << 12), ElementType::Int32, {3}, kCuda);
  kv.kv_indptr = Tensor::dense(at(5 << 12), ElementType::Int32, {3}, kCuda);
  kv.batch_indices = Tensor::dense(at(6 << 12), ElementType::Int32, {4}, kCuda);
  const Result<call::PreparedCall> k = call::prepare_call(paged, kv);
  ASSERT_TRUE(k) << format(k.errors());
  EXPECT_EQ((*k)[abi::Arg::CachePositions].data, at(2 << 12)) << "the int32 positions place the tokens";
  kv.cache_positions = Tensor::dense(at(7 << 12), ElementType::Int32, {4}, kCuda);
  EXPECT_EQ((*call::prepare_call(paged, kv))[abi::Arg::CachePositions].data, at(7 << 12));
  // Memory checks are address arithmetic: they still apply.
  kv.cache_positions = Tensor::dense(at(3 << 12), ElementType::Int32, {4}, kCuda);
  EXPECT_NE(messages(paged, kv), "") << "cache_positions overlaps k_cache, which the call writes";
}

// What needs a value asks the caller for it.
TEST_F(DeviceCall, WhatTheHostWouldComputeIsAskedFor) {
  const RopeSpec thd = spec_from("name: t\nhead_dim: 16\nlayout: thd\n");
  Call c;
  c.q = Tensor::dense(at(0), ElementType::Float32, {5, 2, 16}, kVulkan);
  EXPECT_EQ(messages(thd, c), "cu_seqlens: error: a device call in layout thd with implicit positions needs cu_seqlens "
                              "(int32 [num_sequences + 1], on the device; [0, T] for one sequence): the kernels read the "
                              "sequence starts there\n");
  c.cu_seqlens = Tensor::dense(at(4096), ElementType::Int64, {2}, kVulkan);
  EXPECT_EQ(messages(thd, c), "cu_seqlens: error: cu_seqlens has dtype int64: a device call passes int32 cu_seqlens (the "
                              "kernels read int32 starts; converting these would read device memory)\n");
  c.cu_seqlens->type = ElementType::Int32;
  const Result<call::PreparedCall> p = call::prepare_call(thd, c);
  ASSERT_TRUE(p) << format(p.errors());
  EXPECT_EQ((*p)[abi::Arg::CuSeqlens].data, at(4096)) << "the caller's starts, not a host copy";
  EXPECT_TRUE(p->owned_cu_seqlens.empty());
  EXPECT_FALSE(p->seq_len_known) << "the longest sequence is on the device";

  const RopeSpec paged = spec_from("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                   "kv_cache: {layout: paged_nhd, page_size: 4}\n");
  Call kv;
  kv.q = Tensor::dense(at(0), ElementType::Float32, {4, 2, 8}, kCuda);
  kv.k = Tensor::dense(at(1 << 12), ElementType::Float32, {4, 1, 8}, kCuda);
  kv.positions = Tensor::dense(at(2 << 12), ElementType::Int64, {4}, kCuda);
  kv.k_cache = Tensor::dense(at(3 << 12), ElementType::Float32, {3, 4, 1, 8}, kCuda);
  kv.kv_indices = Tensor::dense(at(4 << 12), ElementType::Int32, {3}, kCuda);
  kv.kv_indptr = Tensor::dense(at(5 << 12), ElementType::Int32, {3}, kCuda);
  kv.batch_indices = Tensor::dense(at(6 << 12), ElementType::Int32, {4}, kCuda);
  EXPECT_EQ(messages(paged, kv), "cache_positions: error: a device call with int64 positions passes cache_positions "
                                 "(int32 [T], each token's place in its request's cache): the kernels read int32 places, "
                                 "and converting the positions would read device memory\n");

  // A call cut into parts would sum dL/d(inv_freq) on the host.
  const RopeSpec runtime = spec_from("name: r\nhead_dim: 128\nfrequency: {scheme: runtime}\n");
  Call big;
  const int64_t S = (int64_t{1} << 31) / (128 * 32) + 1;  // q spans more than 2^31 elements
  big.q = Tensor::dense(at(0), ElementType::Float32, {1, S, 32, 128}, kCuda);
  big.saved_q = Tensor::dense(at(int64_t{1} << 34), ElementType::Float32, {1, S, 32, 128}, kCuda);
  big.freqs = Tensor::dense(at(int64_t{1} << 35), ElementType::Float32, {64}, kCuda);
  big.d_freqs = Tensor::dense(at((int64_t{1} << 35) + 4096), ElementType::Float32, {64}, kCuda);
  big.backward = true;
  EXPECT_EQ(messages(runtime, big), "d_freqs: error: this device call is cut into several kernel calls (a tensor spans "
                                    "more than the 2^31-1 elements one kernel argument addresses), whose "
                                    "dL/d(inv_freq) would be summed on the host: pass fewer tokens per call\n");
  big.q->shape[1] = big.saved_q->shape[1] = S - 3;  // one part
  EXPECT_EQ(messages(runtime, big), "");
}

// q and k as views of one fused qkv tensor [B, S, 4 + 1 + 1, 16], out of
// place into a [B, S, 5, 16] tensor: device-only buffers at the views'
// addresses, strides as given, nothing copied.
TEST_F(DeviceCall, PartViewsAreDeviceOnlyViewsOfTheCallersMemory) {
  const int64_t B = 2, S = 3, row = 6 * 16;
  Call c;
  c.q = Tensor::strided(at(0), ElementType::BFloat16, {B, S, 4, 16}, {S * row, row, 16, 1}, kVulkan);
  c.k = Tensor::strided(at(4 * 16 * 2), ElementType::BFloat16, {B, S, 1, 16}, {S * row, row, 16, 1}, kVulkan);
  c.out_q = Tensor::strided(at(1 << 20), ElementType::BFloat16, {B, S, 4, 16}, {S * 80, 80, 16, 1}, kVulkan);
  c.out_k = Tensor::strided(at((1 << 20) + 64 * 2), ElementType::BFloat16, {B, S, 1, 16}, {S * 80, 80, 16, 1}, kVulkan);
  c.positions = Tensor::dense(at(2 << 20), ElementType::Int32, {B, S}, kVulkan);
  const Result<call::PreparedCall> p = call::prepare_call(kBshd, c);
  ASSERT_TRUE(p) << format(p.errors());

  const call::PartViews views = call::part_views(*p, {1, 2, 0, B}, &kInterface);  // tokens 1..2
  const halide_buffer_t& q = views[abi::Arg::Q].buf;
  EXPECT_EQ(q.host, nullptr);
  EXPECT_EQ(q.device_interface, &kInterface);
  EXPECT_EQ(q.device, reinterpret_cast<uintptr_t>(at(1 * row * 2))) << "moved to the part's first token";
  EXPECT_EQ(q.flags, 0u) << "nothing to copy either way";
  const int want_q[4][3] = {{0, 16, 1}, {0, 4, 16}, {1, 2, static_cast<int>(row)}, {0, 2, static_cast<int>(S * row)}};
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(q.dim[d].min, want_q[d][0]) << d;
    EXPECT_EQ(q.dim[d].extent, want_q[d][1]) << d;
    EXPECT_EQ(q.dim[d].stride, want_q[d][2]) << d;
  }
  EXPECT_EQ(views[abi::Arg::K].buf.device, reinterpret_cast<uintptr_t>(at(4 * 16 * 2 + row * 2)));
  EXPECT_EQ(views[abi::Arg::Positions].buf.device, reinterpret_cast<uintptr_t>(at((2 << 20) + 4)));
  EXPECT_EQ(views[abi::Arg::Positions].buf.host, nullptr);

  // The kernels write the rotary dims 8..15; out of place, dims 0..7 are copied.
  const ropegen_contract kc = call::kernel_contract(p->contract, p->variant);
  const call::BoundPart bound = call::bind_part(kc, p->variant, views);
  EXPECT_EQ(bound.rope[abi::Arg::OutQ].buf.device, reinterpret_cast<uintptr_t>(at((1 << 20) + 80 * 2 + 8 * 2)));
  EXPECT_EQ(bound.rope[abi::Arg::OutQ].buf.host, nullptr);
  ASSERT_EQ(bound.pass_through.size(), 2u);  // q's and k's dims 0..7
  EXPECT_EQ(bound.pass_through[1].out.buf.device, reinterpret_cast<uintptr_t>(at((1 << 20) + 64 * 2 + 80 * 2)));
  EXPECT_EQ(bound.pass_through[1].out.dim[0].extent, 8);

  // In place: the same addresses, nothing to copy.
  c.out_q.reset(), c.out_k.reset();
  const Result<call::PreparedCall> in_place = call::prepare_call(kBshd, c);
  ASSERT_TRUE(in_place) << format(in_place.errors());
  const call::PartViews same = call::part_views(*in_place, {0, S, 0, B}, &kInterface);
  EXPECT_TRUE(call::bind_part(kc, in_place->variant, same).pass_through.empty());
}

// The cos/sin cache of a device call is passed whole: its rows up to the
// largest position cannot be known.
TEST_F(DeviceCall, CosSinCacheWhole) {
  const RopeSpec table = spec_from("name: t\nhead_dim: 16\npositions: explicit\nfrequency: {scheme: table}\n");
  Call c;
  c.q = Tensor::dense(at(0), ElementType::Float32, {1, 3, 2, 16}, kCuda);
  c.positions = Tensor::dense(at(4096), ElementType::Int32, {3}, kCuda);
  c.cos_sin_cache = Tensor::strided(at(8192), ElementType::Float32, {4096, 16}, {32, 1}, kCuda);
  const Result<call::PreparedCall> p = call::prepare_call(table, c);
  ASSERT_TRUE(p) << format(p.errors());
  EXPECT_EQ((*p)[abi::Arg::CosSinCache].extent[1], 4096);
  EXPECT_EQ((*p)[abi::Arg::CosSinCache].stride[1], 32);
}

}  // namespace
}  // namespace ropegen
