// The tensors' memory (call/prepare_call.h, call/parts.h): strides past 32 bits run
// right (views over sparse memory, canaries around the outputs), a call of
// more than 2^31 elements is cut into parts, overlapping tensors are
// refused unless in place or side by side (fused qkv), empty calls do
// nothing, 64-bit overflow is an error.
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ropegen/spec_io.h"
#include "call/parts.h"
#include "ropegen/runtime.h"
#include "runtime/jit_kernel.h"

namespace ropegen {
namespace {

using ::testing::HasSubstr;

RopeSpec spec_from(const std::string& text) { return parse_spec(text, "test").value(); }

const RopeSpec kF16 = spec_from("name: wide\nhead_dim: 128\ndtype: f16\n");
// Pass-through copies and position ids in every part too.
const RopeSpec kPartialIds =
    spec_from("name: wide_ids\nhead_dim: 128\nrotary_dim: 64\nrotary_offset: 32\ndtype: f16\npositions: explicit\n");
constexpr int64_t D = 128;

Tensor bshd(const void* data, std::vector<int64_t> shape, std::vector<int64_t> strides,
            ElementType type = ElementType::Float16) {
  Tensor t = Tensor::dense(const_cast<void*>(data), type, shape.data(), static_cast<int>(shape.size()));
  for (size_t i = 0; i < strides.size(); ++i) t.strides[i] = strides[i];
  return t;
}

std::string messages(const RopeSpec& spec, const Call& call) {
  const Result<call::PreparedCall> p = call::prepare_call(spec, call);
  return p ? "" : format(p.errors());
}

call::PreparedCall prepared(const RopeSpec& spec, const Call& c) {
  Result<call::PreparedCall> p = call::prepare_call(spec, c);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : format(p.errors()));
  return std::move(p).value();
}

void run(runtime::CompiledKernel& kernel, const RopeSpec& spec, const Call& c) { kernel.run(prepared(spec, c)); }

// Address space without memory: pages appear when touched.
struct Sparse {
  explicit Sparse(size_t bytes) : size(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~Sparse() {
    if (base) munmap(base, size);
  }
  uint8_t* base;
  size_t size;
};

// Two batches of one token, `batch_stride` elements apart, in and out of
// place over sparse memory; every byte within 4 MiB of an output row that
// is not the row must keep its canary, and both rows must be the dense
// call's result (a partial-rotary spec with explicit ids).
void check_batch_stride(int64_t batch_stride) {
  SCOPED_TRACE(batch_stride);
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t row_bytes = D * 2, reach = batch_stride * 2 + row_bytes;
  Sparse memory(reach + 16 * kMiB);
  ASSERT_NE(memory.base, nullptr);
  uint8_t* in = memory.base + 4 * kMiB;
  uint8_t* out = in + 4 * kMiB;  // side by side with `in` along d: allowed

  std::vector<Halide::float16_t> dense_in(2 * D), dense_out(2 * D);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : dense_in) v = Halide::float16_t(u(rng));
  runtime::JitKernel kernel(kPartialIds, {}, Halide::get_host_target());
  std::vector<int32_t> ids = {5, 9};
  Call dense;
  dense.q = bshd(dense_in.data(), {2, 1, 1, D}, {D, D, D, 1});
  dense.out_q = bshd(dense_out.data(), {2, 1, 1, D}, {D, D, D, 1});
  dense.positions = Tensor::dense(ids.data(), ElementType::Int32, {2, 1});
  run(kernel, kPartialIds, dense);

  for (uint8_t* row : {out, out + batch_stride * 2}) {
    std::memset(row - 4 * kMiB + row_bytes, 0xA5, 4 * kMiB - row_bytes);  // out's rows are 4 MiB after in's
    std::memset(row + row_bytes, 0xA5, 4 * kMiB);
  }
  for (int b = 0; b < 2; ++b) std::memcpy(in + b * batch_stride * 2, dense_in.data() + b * D, row_bytes);
  Call call = dense;
  call.q = bshd(in, {2, 1, 1, D}, {batch_stride, D, D, 1});
  call.out_q = bshd(out, {2, 1, 1, D}, {batch_stride, D, D, 1});
  ASSERT_EQ(messages(kPartialIds, call), "");
  EXPECT_EQ(call::plan_parts(prepared(kPartialIds, call)).size(), 2u) << "each batch a part of its own";
  run(kernel, kPartialIds, call);
  for (int b = 0; b < 2; ++b) {
    uint8_t* row = out + b * batch_stride * 2;
    EXPECT_EQ(std::memcmp(row, dense_out.data() + b * D, row_bytes), 0) << "batch " << b;
    for (const uint8_t* p = row + row_bytes; p < row + 4 * kMiB; ++p) ASSERT_EQ(*p, 0xA5) << "after batch " << b;
    for (const uint8_t* p = row - 4 * kMiB + row_bytes; p < row; ++p) {
      if (p < in || p >= in + row_bytes) {
        ASSERT_EQ(*p, 0xA5) << (row - p) << " bytes before batch " << b;
      }
    }
  }
  call.out_q = call.q;  // in place
  run(kernel, kPartialIds, call);
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(std::memcmp(in + b * batch_stride * 2, dense_out.data() + b * D, row_bytes), 0) << "in place, batch " << b;
  }
}

TEST(TensorMemory, BatchStridesPast32BitsRunRight) {
  check_batch_stride((int64_t{1} << 32) - (int64_t{1} << 20));  // truncated, it was -2^20: writes 2 MiB before out
  check_batch_stride(int64_t{1} << 32);                         // truncated, 0: batch 1 never written
}

// dL/d(inv_freq) of a call cut in two is the sum of its parts'.
TEST(TensorMemory, BackwardSumsDFreqsOverParts) {
  const RopeSpec spec = spec_from("name: grads\nhead_dim: 16\nfrequency:\n  scheme: runtime\n");
  const int64_t d = 16, batch_stride = int64_t{1} << 31;
  Sparse memory(batch_stride * 4 * 3 + (size_t{1} << 20));
  ASSERT_NE(memory.base, nullptr);
  auto* grad = reinterpret_cast<float*>(memory.base);  // grad, saved and out rows interleaved: side by side
  std::vector<float> dense_grad(2 * d), dense_saved(2 * d), dense_out(2 * d), out_rows(2 * d);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t i = 0; i < dense_grad.size(); ++i) dense_grad[i] = u(rng), dense_saved[i] = u(rng);
  std::vector<float> freqs = {1.0f, 0.5f, 0.25f, 0.125f, 0.06f, 0.03f, 0.01f, 0.001f}, d_dense(8), d_parts(8, 9.0f);
  lowering::KernelVariant backward;
  backward.backward = true;
  runtime::JitKernel kernel(spec, backward, Halide::get_host_target());
  auto call_over = [&](float* g, float* saved, float* out, std::vector<int64_t> strides, std::vector<float>& d_freqs) {
    Call c;
    c.backward = true;
    c.q = bshd(g, {2, 1, 1, d}, strides, ElementType::Float32);
    c.saved_q = bshd(saved, {2, 1, 1, d}, strides, ElementType::Float32);
    c.out_q = bshd(out, {2, 1, 1, d}, strides, ElementType::Float32);
    c.freqs = Tensor::dense(freqs.data(), ElementType::Float32, {8});
    c.d_freqs = Tensor::dense(d_freqs.data(), ElementType::Float32, {8});
    c.offset = 3;  // position 3: a non-zero gradient
    c.seq_len = 4;
    return c;
  };
  run(kernel, spec, call_over(dense_grad.data(), dense_saved.data(), dense_out.data(), {d, d, d, 1}, d_dense));
  for (int b = 0; b < 2; ++b) {
    std::memcpy(grad + b * batch_stride, dense_grad.data() + b * d, d * 4);
    std::memcpy(grad + b * batch_stride + d, dense_saved.data() + b * d, d * 4);
  }
  const Call split = call_over(grad, grad + d, grad + 2 * d, {batch_stride, d, d, 1}, d_parts);
  ASSERT_EQ(call::plan_parts(prepared(spec, split)).size(), 2u);
  run(kernel, spec, split);
  for (int b = 0; b < 2; ++b) std::memcpy(out_rows.data() + b * d, grad + b * batch_stride + 2 * d, d * 4);
  EXPECT_EQ(out_rows, dense_out);
  for (int r = 0; r < 8; ++r) EXPECT_NEAR(d_parts[r], d_dense[r], 1e-6 + 1e-5 * std::abs(d_dense[r])) << "pair " << r;
}

TEST(TensorMemory, CallsPast2To31ElementsAreCutIntoParts) {
  Call call;  // 2^33 elements, never touched: only planned
  auto* fake = reinterpret_cast<void*>(uintptr_t{1} << 40);
  call.q = bshd(fake, {4, 1 << 20, 16, D}, {});
  call.out_q = call.q;
  ASSERT_EQ(messages(kF16, call), "");
  const call::PreparedCall whole = prepared(kF16, call);
  const std::vector<call::CallPart> parts = call::plan_parts(whole);
  int64_t tokens = 0;
  for (const call::CallPart& p : parts) {
    EXPECT_EQ(p.nb, 1);
    EXPECT_LE(p.ns * 16 * D, INT32_MAX);
    tokens += p.ns;
    const call::PartViews b = call::part_views(whole, p, nullptr);
    EXPECT_EQ(b[abi::Arg::Q].dim[2].min, p.s0);  // the caller's coordinates
    EXPECT_EQ(b[abi::Arg::Q].dim[3].min, p.b0);
    EXPECT_EQ(b[abi::Arg::Q].buf.host - static_cast<uint8_t*>(fake), (p.b0 * (int64_t{1} << 20) + p.s0) * 16 * D * 2);
  }
  EXPECT_EQ(parts.size(), 8u);
  EXPECT_EQ(tokens, 4 << 20);
  // Batches that fit whole go together.
  call.q = bshd(fake, {64, 8, 2, D}, {int64_t{1} << 24, 2 * D, D, 1});
  call.out_q = call.q;
  EXPECT_EQ(call::plan_parts(prepared(kF16, call)).size(), 1u);
  call.q->strides[0] = call.out_q->strides[0] = int64_t{1} << 28;
  EXPECT_EQ(call::plan_parts(prepared(kF16, call)).size(), 10u);  // 7 batches of 2^28 per part (8 would reach 2^31): 64 in 10
}

TEST(TensorMemory, OverlapIsRefusedUnlessInPlaceOrSideBySide) {
  std::vector<Halide::float16_t> m(6 * D);
  Call call;
  const std::vector<int64_t> dense = {D, D, D, 1};
  call.q = bshd(m.data(), {1, 2, 1, D}, dense);
  call.out_q = bshd(m.data() + D, {1, 2, 1, D}, dense);  // one token later
  EXPECT_THAT(messages(kF16, call), HasSubstr("out_q overlaps q in memory"));
  call.out_q = bshd(m.data(), {1, 2, 1, D}, {2 * D, D, D, 1});  // same data and shape, its own strides: same elements
  EXPECT_EQ(messages(kF16, call), "");
  call.out_q = bshd(m.data(), {1, 2, 1, D}, {D, 2 * D, D, 1});  // same data, other strides
  EXPECT_THAT(messages(kF16, call), HasSubstr("out_q overlaps q in memory"));

  // In place, k inside q's memory: out_q would overwrite k.
  call.q = call.out_q = bshd(m.data(), {1, 2, 1, D}, dense);
  call.k = call.out_k = bshd(m.data() + D, {1, 2, 1, D}, dense);
  EXPECT_THAT(messages(kF16, call), HasSubstr("out_q overlaps k in memory"));
  EXPECT_THAT(messages(kF16, call), HasSubstr("out_q overlaps out_k in memory"));
  // Fused qkv: q heads 0..1 and k head 2 of every token, in place.
  call.q = call.out_q = bshd(m.data(), {1, 2, 2, D}, {6 * D, 3 * D, D, 1});
  call.k = call.out_k = bshd(m.data() + 2 * D, {1, 2, 1, D}, {6 * D, 3 * D, D, 1});
  EXPECT_EQ(messages(kF16, call), "");
  call.k = call.out_k = bshd(m.data() + D, {1, 2, 1, D}, {6 * D, 3 * D, D, 1});  // k is q's second head
  EXPECT_THAT(messages(kF16, call), HasSubstr("out_q overlaps k in memory"));

  Call self;
  self.q = bshd(m.data(), {1, 2, 1, D}, dense);
  self.out_q = bshd(m.data() + 2 * D, {1, 2, 1, D}, {D, 0, D, 1});  // both tokens on one row
  EXPECT_THAT(messages(kF16, self), HasSubstr("out_q's elements overlap each other"));
  self.out_q = bshd(m.data() + 2 * D, {1, 2, 1, D}, {D, D / 2, D, 1});
  EXPECT_THAT(messages(kF16, self), HasSubstr("out_q's elements overlap each other"));

  std::vector<float> f(D), saved(D), freqs(64, 0.5f);
  Call grad;  // dL/d(inv_freq) written over an input
  grad.backward = true;
  grad.q = grad.out_q = bshd(f.data(), {1, 1, 1, D}, dense, ElementType::Float32);
  grad.saved_q = bshd(saved.data(), {1, 1, 1, D}, dense, ElementType::Float32);
  grad.freqs = Tensor::dense(freqs.data(), ElementType::Float32, {64});
  grad.d_freqs = Tensor::dense(f.data() + 8, ElementType::Float32, {64});
  EXPECT_THAT(messages(spec_from("name: g\nhead_dim: 128\nfrequency: {scheme: runtime}\n"), grad),
              HasSubstr("d_freqs overlaps q in memory"));
}

TEST(TensorMemory, SizesThatCannotBeAddressedAreErrors) {
  std::vector<Halide::float16_t> m(D);
  Call call;
  call.q = bshd(m.data(), {2, 1, 1, D}, {INT64_MAX / 2, D, D, 1});
  call.out_q = bshd(m.data(), {2, 1, 1, D}, {D, D, D, 1});
  EXPECT_THAT(messages(kF16, call), HasSubstr("q's strides reach past the 64-bit address space"));
  call.q = call.out_q = bshd(m.data(), {1, 1, 2, D}, {D, D, int64_t{1} << 31, 1});
  EXPECT_THAT(messages(kF16, call), HasSubstr("one token of q (2 heads, 2147483648 elements apart) spans more than the "
                                              "2^31-1 elements"));
  call.q = call.out_q = bshd(m.data(), {1, 1, 1, D}, {D, D, D, 2});
  EXPECT_THAT(messages(kF16, call), HasSubstr("the last dim of q must be contiguous (stride 1, not 2)"));
  call.q = call.out_q = bshd(m.data(), {int64_t{1} << 31, 1, 1, D}, {D, D, D, 1});
  EXPECT_THAT(messages(kF16, call), HasSubstr("q has shape (2147483648, 1, 1, 128): every dim must be in 0..2^31-1"));
  // What the library hands out refuses it the same way, before compiling anything.
  Runtime r{RuntimeOptions{}};
  const Status ran = r.run(kF16, call);
  ASSERT_FALSE(ran.ok());
  EXPECT_THAT(format(ran.errors()), HasSubstr("every dim must be in 0..2^31-1"));
  EXPECT_EQ(r.counters().memory_misses, 0u);
}

TEST(TensorMemory, EmptyCallsRunNothing) {
  Call call;
  std::vector<float> freqs(64, 0.5f), d(64, 7.0f);
  call.q = call.out_q = bshd(nullptr, {2, 0, 4, D}, {}, ElementType::Float32);
  call.saved_q = bshd(nullptr, {2, 0, 4, D}, {}, ElementType::Float32);
  call.freqs = Tensor::dense(freqs.data(), ElementType::Float32, {64});
  call.d_freqs = Tensor::dense(d.data(), ElementType::Float32, {64});
  call.backward = true;
  int parts = 0;
  call::run_in_parts(prepared(spec_from("name: e\nhead_dim: 128\nfrequency: {scheme: runtime}\n"), call), nullptr,
                     [&](const call::PartViews&) { ++parts; });
  EXPECT_EQ(parts, 0);
  EXPECT_EQ(d, std::vector<float>(64, 0.0f)) << "dL/d(inv_freq) of no tokens";
}

}  // namespace
}  // namespace ropegen
