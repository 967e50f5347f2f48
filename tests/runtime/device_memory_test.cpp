// ropegen::DeviceMemory (runtime/device_memory.cpp): what it refuses, and
// copies in and out of Vulkan memory at any offset and size (lavapipe in
// CI; skipped, visibly, without a Vulkan device).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "ropegen/device_memory.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/device_probe.h"

namespace ropegen {
namespace {

std::string messages(const Status& s) { return s ? "" : format(s.errors()); }
template <typename T>
std::string messages(const Result<T>& r) {
  return r ? "" : format(r.errors());
}

constexpr Device kVulkan{DeviceType::Vulkan, 0};

#define REQUIRE_VULKAN()                                                      \
  if (const Result<Halide::Target> t = runtime::runnable_target("vulkan"); !t) \
  GTEST_SKIP() << "no Vulkan device: " << format(t.errors())

TEST(DeviceMemory, WhatItDoesNotAllocate) {
  EXPECT_EQ(messages(DeviceMemory::allocate(Device{DeviceType::CPU, 0}, 64)),
            "DeviceMemory: error: host (cpu) tensors are the caller's memory: DeviceMemory allocates on a Vulkan "
            "device\n");
  EXPECT_EQ(messages(DeviceMemory::allocate(Device{DeviceType::CUDA, 0}, 64)),
            "DeviceMemory: error: CUDA tensors are the caller's own device memory (cudaMalloc, PyTorch): pass their "
            "device pointers as Tensor::data; DeviceMemory allocates on Vulkan, where Halide 21 cannot use memory it "
            "did not allocate\n");
  EXPECT_EQ(messages(DeviceMemory::allocate(Device{DeviceType::Vulkan, 1}, 64)),
            "DeviceMemory: error: vulkan:1 is not a device rope-gen can allocate on: Halide's Vulkan runtime runs on "
            "one device per process, vulkan:0\n");
  const DeviceMemory none;
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.size(), 0u);
  std::vector<uint8_t> host(4);
  EXPECT_EQ(messages(none.copy_to_host(host.data(), 4)), "DeviceMemory: error: this DeviceMemory holds no allocation\n");
}

TEST(DeviceMemory, SizesItRefuses) {
  REQUIRE_VULKAN();
  const std::string zero = messages(DeviceMemory::allocate(kVulkan, 0));
  EXPECT_NE(zero.find("0 bytes cannot be allocated: 1 to "), std::string::npos) << zero;
  EXPECT_NE(zero.find("(its maxStorageBufferRange, and 2^31 - 256"), std::string::npos) << zero;
  EXPECT_NE(messages(DeviceMemory::allocate(kVulkan, size_t{1} << 31)), "");
}

// Sizes and offsets that are no multiple of anything: Halide 21's
// allocator mis-sizes such buffers unless rope-gen pads them.
TEST(DeviceMemory, CopiesAtAnyOffsetAndSize) {
  REQUIRE_VULKAN();
  const size_t n = 1001;
  Result<DeviceMemory> m = DeviceMemory::allocate(kVulkan, n);
  ASSERT_TRUE(m) << messages(m);
  DeviceMemory memory = std::move(m).value();
  EXPECT_EQ(memory.size(), n);
  EXPECT_EQ(memory.device(), kVulkan);
  std::vector<uint8_t> in(n), out(n, 0);
  std::iota(in.begin(), in.end(), 7);
  ASSERT_EQ(messages(memory.copy_from_host(in.data(), n)), "");
  ASSERT_EQ(messages(memory.copy_to_host(out.data(), n)), "");
  EXPECT_EQ(in, out);
  // Bytes 3..503 back, then 100 new bytes at 7.
  std::vector<uint8_t> part(500, 0);
  ASSERT_EQ(messages(memory.copy_to_host(part.data(), 500, 3)), "");
  EXPECT_EQ(part, std::vector<uint8_t>(in.begin() + 3, in.begin() + 503));
  std::vector<uint8_t> patch(100, 0xab);
  ASSERT_EQ(messages(memory.copy_from_host(patch.data(), 100, 7)), "");
  std::copy(patch.begin(), patch.end(), in.begin() + 7);
  ASSERT_EQ(messages(memory.copy_to_host(out.data(), n)), "");
  EXPECT_EQ(in, out);
  EXPECT_EQ(messages(memory.copy_to_host(out.data(), 2, n - 1)),
            "DeviceMemory: error: bytes [1000, 1002) are outside this allocation of 1001 bytes\n");
  EXPECT_EQ(messages(memory.copy_from_host(in.data(), 1, n + 5)),
            "DeviceMemory: error: bytes [1006, 1007) are outside this allocation of 1001 bytes\n");

  // Moved: the allocation goes with it.
  void* const data = memory.data();
  DeviceMemory moved = std::move(memory);
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(memory.data(), nullptr);  // NOLINT(bugprone-use-after-move): documented as holding nothing
  ASSERT_EQ(messages(moved.copy_to_host(out.data(), n)), "");
  EXPECT_EQ(in, out);
}

// An allocation keeps its memory after a view's crop is released: Halide
// 21's Vulkan allocator counts crops, not regions, so without the crop
// rope-gen holds for its life the next allocation reused this one's memory.
TEST(DeviceMemory, StaysIntactAfterAViewIsReleasedAndAnotherIsAllocated) {
  REQUIRE_VULKAN();
  const size_t n = 1024;
  Result<DeviceMemory> made_a = DeviceMemory::allocate(kVulkan, n);
  ASSERT_TRUE(made_a) << messages(made_a);
  DeviceMemory a = std::move(made_a).value();
  std::vector<uint8_t> in(n), out(n, 0);
  std::iota(in.begin(), in.end(), 1);
  ASSERT_EQ(messages(a.copy_from_host(in.data(), n)), "");
  std::vector<uint8_t> view(4);
  ASSERT_EQ(messages(a.copy_to_host(view.data(), 4, 256)), "");  // a crop at 256, released
  Result<DeviceMemory> made_b = DeviceMemory::allocate(kVulkan, n);
  ASSERT_TRUE(made_b) << messages(made_b);
  DeviceMemory b = std::move(made_b).value();
  const std::vector<uint8_t> other(n, 0xee);
  ASSERT_EQ(messages(b.copy_from_host(other.data(), n)), "");
  ASSERT_EQ(messages(a.copy_to_host(out.data(), n)), "");
  EXPECT_EQ(in, out);
}

// Each allocation has addresses of its own: views into one never alias another.
TEST(DeviceMemory, AddressesAreDistinct) {
  REQUIRE_VULKAN();
  std::vector<DeviceMemory> all;
  for (size_t bytes : {1, 4096, 5000, 256}) {
    Result<DeviceMemory> m = DeviceMemory::allocate(kVulkan, bytes);
    ASSERT_TRUE(m) << messages(m);
    all.push_back(std::move(m).value());
  }
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = 0; j < all.size(); ++j) {
      const auto* a = static_cast<const uint8_t*>(all[i].data());
      const auto* b = static_cast<const uint8_t*>(all[j].data());
      if (i != j) {
        EXPECT_TRUE(a + all[i].size() <= b || b + all[j].size() <= a) << i << " " << j;
      }
    }
}

// Calls through the public API (ropegen::Runtime) on Vulkan memory: one
// that runs, and what is refused, with messages naming the tensor.
class VulkanCall : public ::testing::Test {
 protected:
  // q [1, 3, 2, 16] float32 at `offset` bytes into a fresh allocation.
  Call call(size_t offset = 0) {
    Result<DeviceMemory> m = DeviceMemory::allocate(kVulkan, 4096);
    EXPECT_TRUE(m) << messages(m);
    memory_ = std::move(m).value();
    host_.resize(96);
    std::iota(host_.begin(), host_.end(), 1.0f);
    EXPECT_EQ(messages(memory_.copy_from_host(host_.data(), host_.size() * 4, offset)), "");
    Call c;
    c.q = Tensor::dense(static_cast<uint8_t*>(memory_.data()) + offset, ElementType::Float32, {1, 3, 2, 16}, kVulkan);
    return c;
  }
  std::string run(const std::string& spec_text, const Call& c) {
    return messages(runtime_.run(parse_spec(spec_text, "test").value(), c, "vulkan"));
  }
  Runtime runtime_{RuntimeOptions{}};
  DeviceMemory memory_;
  std::vector<float> host_;
};

const char* kSpec = "name: v\nhead_dim: 16\n";

TEST_F(VulkanCall, RunsInPlaceOnDeviceMemory) {
  REQUIRE_VULKAN();
  const Call c = call();
  ASSERT_EQ(run(kSpec, c), "");
  std::vector<float> got(96), want = host_;
  ASSERT_EQ(messages(memory_.copy_to_host(got.data(), 96 * 4)), "");
  Call host;
  host.q = Tensor::dense(want.data(), ElementType::Float32, {1, 3, 2, 16});
  ASSERT_EQ(messages(runtime_.run(parse_spec(kSpec, "test").value(), host)), "");
  EXPECT_EQ(got, want) << "Vulkan device memory vs the host kernel";
  EXPECT_NE(got, host_) << "rotated";
}

TEST_F(VulkanCall, RefusedWithTheTensorsName) {
  REQUIRE_VULKAN();
  Call c = call();
  std::vector<int32_t> ids = {0, 1, 2};
  c.positions = Tensor::dense(ids.data(), ElementType::Int32, {3});
  EXPECT_EQ(run("name: v\nhead_dim: 16\npositions: explicit\n", c),
            "positions: error: positions is on cpu:0 but q is on vulkan:0: a call's tensors share one device\n");

  c = call();
  c.q->data = host_.data();  // host memory, said to be Vulkan's
  std::string m = run(kSpec, c);
  EXPECT_NE(m.find("vulkan: error: running the kernel on vulkan failed: q (0x"), std::string::npos) << m;
  EXPECT_NE(m.find(") is not in memory rope-gen allocated on Vulkan (ropegen::DeviceMemory): Halide 21 cannot run "
                   "kernels on other Vulkan memory (halide/Halide#8943)"),
            std::string::npos)
      << m;

  c = call(4);  // one float in
  m = run(kSpec, c);
  EXPECT_NE(m.find("q starts 4 bytes into its Vulkan allocation, but this device binds kernel arguments at multiples "
                   "of "),
            std::string::npos)
      << m;

  c = call();
  c.q->shape[1] = 64;  // 8 KiB of a 4 KiB allocation
  m = run(kSpec, c);
  EXPECT_NE(m.find("q spans bytes [0, 8192) of its Vulkan allocation of 4096 bytes"), std::string::npos) << m;

  c = call();
  m = messages(runtime_.run(parse_spec(kSpec, "test").value(), c, "host"));
  EXPECT_NE(m.find("q is on vulkan:0 but this kernel runs on "), std::string::npos) << m;

  // seq_len is not derived from positions on the device.
  c = call();
  Result<DeviceMemory> ids_memory = DeviceMemory::allocate(kVulkan, 12);
  ASSERT_TRUE(ids_memory) << messages(ids_memory);
  c.positions = Tensor::dense(ids_memory->data(), ElementType::Int32, {3}, kVulkan);
  m = run("name: v\nhead_dim: 16\npositions: explicit\nscaling: {type: dynamic, factor: 2, original_max_position: 2}\n", c);
  EXPECT_NE(m.find("this spec's frequencies depend on seq_len (dynamic NTK scaling, or LongRoPE's per-call choice): a "
                   "device call passes seq_len"),
            std::string::npos)
      << m;
  c.seq_len = 3;
  EXPECT_EQ(run("name: v\nhead_dim: 16\npositions: explicit\nscaling: {type: dynamic, factor: 2, original_max_position: 2}\n", c), "");
}

// The fused paged KV-cache append with every index on the device: the same
// caches as the host's (the int32 positions place the tokens).
TEST_F(VulkanCall, PagedKvAppendWithIndicesOnTheDevice) {
  REQUIRE_VULKAN();
  const RopeSpec spec = parse_spec("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\n"
                                   "kv_cache: {layout: paged_nhd, page_size: 4}\n",
                                   "test")
                            .value();
  std::vector<float> q(4 * 2 * 8), k(4 * 8), v(4 * 8), k_cache(3 * 4 * 8, -1.0f), v_cache(3 * 4 * 8, -2.0f);
  std::iota(q.begin(), q.end(), 0.5f);
  std::iota(k.begin(), k.end(), 100.0f);
  std::iota(v.begin(), v.end(), 200.0f);
  std::vector<int32_t> positions = {4, 5, 6, 0}, kv_indices = {2, 0, 1}, kv_indptr = {0, 2, 3}, batch = {0, 0, 0, 1};
  auto make = [&](std::vector<void*> data, Device device) {
    Call c;
    c.q = Tensor::dense(data[0], ElementType::Float32, {4, 2, 8}, device);
    c.k = Tensor::dense(data[1], ElementType::Float32, {4, 1, 8}, device);
    c.v = Tensor::dense(data[2], ElementType::Float32, {4, 1, 8}, device);
    c.k_cache = Tensor::dense(data[3], ElementType::Float32, {3, 4, 1, 8}, device);
    c.v_cache = Tensor::dense(data[4], ElementType::Float32, {3, 4, 1, 8}, device);
    c.positions = Tensor::dense(data[5], ElementType::Int32, {4}, device);
    c.kv_indices = Tensor::dense(data[6], ElementType::Int32, {3}, device);
    c.kv_indptr = Tensor::dense(data[7], ElementType::Int32, {3}, device);
    c.batch_indices = Tensor::dense(data[8], ElementType::Int32, {4}, device);
    return c;
  };
  const std::vector<std::pair<void*, size_t>> host = {
      {q.data(), q.size() * 4},           {k.data(), k.size() * 4},         {v.data(), v.size() * 4},
      {k_cache.data(), k_cache.size() * 4}, {v_cache.data(), v_cache.size() * 4}, {positions.data(), 16},
      {kv_indices.data(), 12},            {kv_indptr.data(), 12},           {batch.data(), 16}};
  std::vector<DeviceMemory> device;
  std::vector<void*> on_device, on_host;
  for (auto [data, bytes] : host) {
    Result<DeviceMemory> m = DeviceMemory::allocate(kVulkan, bytes);
    ASSERT_TRUE(m) << messages(m);
    device.push_back(std::move(m).value());
    ASSERT_EQ(messages(device.back().copy_from_host(data, bytes)), "");
    on_device.push_back(device.back().data());
    on_host.push_back(data);
  }
  ASSERT_EQ(messages(runtime_.run(spec, make(on_device, kVulkan), "vulkan")), "");
  ASSERT_EQ(messages(runtime_.run(spec, make(on_host, Device{}))), "");
  for (size_t i : {0, 3, 4}) {  // q, k_cache, v_cache
    std::vector<float> got(host[i].second / 4);
    ASSERT_EQ(messages(device[i].copy_to_host(got.data(), host[i].second)), "");
    EXPECT_EQ(got, std::vector<float>(static_cast<float*>(host[i].first), static_cast<float*>(host[i].first) + got.size()))
        << "tensor " << i;
  }
}

}  // namespace
}  // namespace ropegen
