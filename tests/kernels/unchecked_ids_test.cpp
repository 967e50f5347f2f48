// Ids a call cannot check: a device call's positions, page tables and slots
// stay on the device (reading them would synchronise), so the pipelines
// themselves must stay inside their buffers whatever the ids are
// (lowering/README.md, tests/golden/SEMANTICS.md section 9). Here the
// scheduled pipelines run directly, with no prepare_call, on deliberately
// bad ids, on the host and on Vulkan (lavapipe). Every table and cache the
// ids index is a view into a larger buffer whose guard zones (whole pages,
// slots or rows, 256 bytes or more) hold a sentinel — NaN where the kernel
// reads, so a read outside shows in its result — and on Vulkan the views
// are the tensor's part of the larger buffer's device allocation, so a
// kernel's stray access past a tensor lands in its guard. Each run is
// compared bit for bit with a run of the documented meaning: a clamped
// row, a token not appended. Without the kernels' checks (before this
// test) both KV cases and the learned table fail, on the host and Vulkan.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <Halide.h>

#include "kernels/gpu_parity.h"
#include "ropegen/spec_io.h"
#include "runtime/device_call.h"
#include "targets/schedule.h"

namespace ropegen {
namespace {

// A tensor inside a larger buffer: `guard` slices of its outermost dim
// after it, and before it on CPU targets, hold `fill`. view() is the
// tensor (outermost dim from 0), sharing the larger buffer's memory; for a
// GPU target that memory is on the device first, and the view is the same
// device allocation described as smaller (it owns nothing), so a kernel
// writing past the tensor writes into the guard. Not a Halide crop: in
// Halide 21's Vulkan runtime a crop at offset 0 came back without a device
// allocation and kernels ignore a crop's offset (halide/Halide#8944, fixed
// after 21), hence no guard before a tensor on the device. GPU buffers are
// padded with more guard to a multiple of 256 bytes (Halide 21's Vulkan
// allocator: runtime/device_call.h).
template <typename T>
class Guarded {
 public:
  Guarded(std::vector<int> extents, int guard, T fill, const Halide::Target& target)
      : target_(target), lead_(target.has_gpu_feature() ? 0 : guard), trail_(guard), fill_(fill) {
    slice_ = 1;
    for (size_t d = 0; d + 1 < extents.size(); ++d) slice_ *= extents[d];
    while (target.has_gpu_feature() && slice_ * sizeof(T) * (extents.back() + trail_) % 256 != 0) ++trail_;
    extents.back() += lead_ + trail_;
    whole_ = Halide::Buffer<T>(extents);
    whole_.fill(fill);
  }
  // Element (x, y) of a 2-D tensor (a table's column, row).
  T& at(int x, int y) { return whole_(x, y + lead_); }
  // Valid while this object lives.
  Halide::Buffer<T> view() {
    if (target_.has_gpu_feature()) {
      whole_.set_host_dirty();
      EXPECT_EQ(whole_.copy_to_device(target_), 0);
    }
    halide_buffer_t raw = *whole_.raw_buffer();
    std::vector<halide_dimension_t> dims(raw.dim, raw.dim + raw.dimensions);
    dims.back().extent -= lead_ + trail_;
    raw.dim = dims.data();
    raw.host += lead_ * slice_ * sizeof(T);
    return Halide::Buffer<T>(raw);
  }
  // After a run that wrote through a view on the device.
  void copy_back() {
    if (!target_.has_gpu_feature()) return;
    whole_.set_device_dirty();
    EXPECT_EQ(whole_.copy_to_host(), 0);
  }
  bool guards_intact() const {
    const int slices = whole_.dim(whole_.dimensions() - 1).extent();
    for (int i = 0; i < slices; ++i) {
      if (i >= lead_ && i < slices - trail_) continue;
      for (int64_t j = 0; j < slice_; ++j)
        if (std::memcmp(&whole_.data()[i * slice_ + j], &fill_, sizeof(T)) != 0) return false;
    }
    return true;
  }
  std::vector<uint8_t> bytes() const {
    const auto* p = reinterpret_cast<const uint8_t*>(whole_.data());
    return std::vector<uint8_t>(p, p + whole_.size_in_bytes());
  }

 private:
  Halide::Target target_;
  int lead_, trail_;
  int64_t slice_;  // elements per slice of the outermost dim
  T fill_;
  Halide::Buffer<T> whole_;
};

// The inputs a case passes (undefined: not an argument of its spec).
struct Inputs {
  Halide::Buffer<> q, k, v, positions, kv_indices, kv_indptr, batch_indices, cache_positions, slot_mapping, table,
      cos_sin_cache;
};

// The spec's scheduled pipeline for `target`, run once on `in` into `out`
// (its outputs, in RopeAlgorithm::outputs() order), each copied back to
// the host (a view of a Guarded buffer copies its own part).
void run(const std::string& spec_text, const lowering::KernelVariant& variant, const Halide::Target& target,
         const Inputs& in, std::vector<Halide::Buffer<>> out) {
  const RopeSpec spec = parse_spec(spec_text, "ids.yaml").value();
  lowering::RopeAlgorithm a = targets::scheduled_algorithm(spec, variant, target);
  using abi::Arg;
  const std::pair<Arg, Halide::Buffer<>> bindings[] = {{Arg::Q, in.q},
                                                       {Arg::K, in.k},
                                                       {Arg::V, in.v},
                                                       {Arg::Positions, in.positions},
                                                       {Arg::KvIndices, in.kv_indices},
                                                       {Arg::KvIndptr, in.kv_indptr},
                                                       {Arg::BatchIndices, in.batch_indices},
                                                       {Arg::CachePositions, in.cache_positions},
                                                       {Arg::SlotMapping, in.slot_mapping},
                                                       {Arg::Table, in.table},
                                                       {Arg::CosSinCache, in.cos_sin_cache}};
  for (auto [arg, buffer] : bindings)
    if (buffer.defined()) a.input(arg).set(buffer);
  Halide::Pipeline pipeline(a.outputs());
  pipeline.compile_jit(target);
  pipeline.realize(Halide::Realization(out), target);
  for (Halide::Buffer<>& b : out) EXPECT_EQ(b.copy_to_host(), 0);
}

// Every case has 64 tokens, and index tables 64 entries: each tensor is a
// whole multiple of 256 bytes, as Halide 21's Vulkan allocator needs.
constexpr int kTokens = 64, kD = 8, kHeads = 2;

// `v`, then `pad`, 64 entries.
Halide::Buffer<int32_t> ids32(std::vector<int32_t> v, int32_t pad) {
  v.resize(kTokens, pad);
  Halide::Buffer<int32_t> b(kTokens);
  for (int i = 0; i < kTokens; ++i) b(i) = v[i];
  return b;
}

Halide::Buffer<float> values(int heads, float scale) {
  Halide::Buffer<float> b(kD, heads, kTokens, 1);
  int i = 0;
  b.for_each_value([&](float& x) { x = scale * std::sin(0.37f * static_cast<float>(++i)); });
  return b;
}

// q's rotary view (r, m, h, s, b) for a half-paired spec over q-shaped storage (d, h, s, b).
Halide::Buffer<float> rotary_view(Halide::Buffer<float>& storage) {
  const int d = storage.dim(0).extent(), h = storage.dim(1).extent(), s = storage.dim(2).extent(), b = storage.dim(3).extent();
  const halide_dimension_t dims[] = {{0, d / 2, 1, 0}, {0, 2, d / 2, 0}, {0, h, d, 0}, {0, s, d * h, 0}, {0, b, d * h * s, 0}};
  return Halide::Buffer<float>(storage.data(), 5, dims);
}

// The fused KV-cache append with a token of every kind the pipeline must
// skip; the expectation is the same call with those tokens' batch index
// (slot) -1, the host-checked way of not appending a token. Tokens after
// the listed ones are padding (-1).
struct KvCase {
  bool paged;
  std::vector<int32_t> batch_indices, cache_positions, kv_indptr, kv_indices, slot_mapping;
  std::vector<int32_t> batch_indices_ok, slot_mapping_ok;  // the bad tokens made padding
};

KvCase paged_case() {
  KvCase c;
  c.paged = true;
  // Requests 0, 1, 2 own pages {3, 0}, {2} and {9: outside the cache of
  // 5 pages}; requests 3 .. 62 own none.
  c.kv_indptr = {0, 2, 3};
  c.kv_indices = {3, 0, 2, 9};
  // Tokens (request, position): right, right, right, a page outside the
  // cache, request 3 (no pages), request 63 of 63, past request 0's 8
  // entries, a negative position, padding, right.
  c.batch_indices = {0, 0, 1, 2, 3, 63, 0, 1, -1, 1};
  c.cache_positions = {0, 5, 2, 0, 0, 0, 8, -1, 0, 1};
  c.batch_indices_ok = {0, 0, 1, -1, -1, -1, -1, -1, -1, 1};
  return c;
}

KvCase contiguous_case() {
  KvCase c;
  c.paged = false;
  // 6 slots: right, past the last, padding, right, far past, right, very negative.
  c.slot_mapping = {0, 6, -1, 3, 100, 5, -1000};
  c.slot_mapping_ok = {0, -1, -1, 3, -1, 5, -1};
  return c;
}

// Runs a case's bad or fixed ids; returns the caches' whole buffers (guards included).
std::vector<std::vector<uint8_t>> run_kv(const KvCase& c, bool fixed, const Halide::Target& target) {
  constexpr int kPageSize = 4, kPages = 5, kSlots = 6;
  const std::string spec = std::string("name: kv\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: ") +
                           (c.paged ? "{layout: paged_nhd, page_size: 4}\n" : "{layout: contiguous}\n");
  lowering::KernelVariant variant;
  variant.with_v = true;
  // Caches (d, h, entry, page): a guard page (256 bytes) or 4 slots each side.
  const std::vector<int> cache_shape = c.paged ? std::vector<int>{kD, kHeads, kPageSize, kPages} : std::vector<int>{kD, kHeads, 1, kSlots};
  const int guard = c.paged ? 1 : 4;
  Guarded<float> k_cache(cache_shape, guard, -77.0f, target), v_cache(cache_shape, guard, -77.0f, target);
  Inputs in;
  in.q = values(kHeads, 1.0f), in.k = values(kHeads, 2.0f), in.v = values(kHeads, 3.0f);
  Halide::Buffer<int32_t> positions(kTokens, 1);
  for (int t = 0; t < kTokens; ++t) positions(t, 0) = t;
  in.positions = positions;
  if (c.paged) {
    in.kv_indptr = ids32(c.kv_indptr, c.kv_indptr.back() + 1);  // the last request (2) ends at 4
    in.kv_indices = ids32(c.kv_indices, 0);
    in.batch_indices = ids32(fixed ? c.batch_indices_ok : c.batch_indices, -1);
    in.cache_positions = ids32(c.cache_positions, 0);
  } else {
    in.slot_mapping = ids32(fixed ? c.slot_mapping_ok : c.slot_mapping, -1);
  }
  Halide::Buffer<float> out_q_storage(kD, kHeads, kTokens, 1);
  run(spec, variant, target, in, {rotary_view(out_q_storage), k_cache.view(), v_cache.view()});
  k_cache.copy_back(), v_cache.copy_back();
  EXPECT_TRUE(k_cache.guards_intact()) << "k_cache's guard zones were written";
  EXPECT_TRUE(v_cache.guards_intact()) << "v_cache's guard zones were written";
  return {k_cache.bytes(), v_cache.bytes()};
}

void expect_kv_tokens_skipped(const Halide::Target& target) {
  for (const KvCase& c : {paged_case(), contiguous_case()}) {
    SCOPED_TRACE(std::string(c.paged ? "paged_nhd" : "contiguous") + " on " + target.to_string());
    const auto bad = run_kv(c, false, target), fixed = run_kv(c, true, target);
    EXPECT_TRUE(bad[0] == fixed[0]) << "k_cache: a token whose target is outside the cache was appended";
    EXPECT_TRUE(bad[1] == fixed[1]) << "v_cache: a token whose target is outside the cache was appended";
  }
}

// Rows read at ids outside a table (a cos/sin cache, a learned table) are
// its first or last row: the result equals the run with the ids clamped.
constexpr int kRows = 6;
std::vector<int64_t> bad_ids() {
  std::vector<int64_t> ids = {0, 5, 6, -1, int64_t{1} << 40, -(int64_t{1} << 40), 3, int64_t{1} << 53, 2, INT64_MIN};
  for (int t = static_cast<int>(ids.size()); t < kTokens; ++t) ids.push_back(t % 9 - 1);
  return ids;
}

std::vector<int64_t> clamped(std::vector<int64_t> ids) {
  for (int64_t& id : ids) id = std::min<int64_t>(std::max<int64_t>(id, 0), kRows - 1);
  return ids;
}

// One table-reading spec on `ids`; returns its output's values.
std::vector<float> run_table(bool learned, const std::vector<int64_t>& ids, const Halide::Target& target) {
  const std::string spec = learned ? "name: w\nencoding: learned\ndim: 8\n"
                                   : "name: t\nhead_dim: 8\npositions: explicit\nfrequency: {scheme: table}\n";
  lowering::KernelVariant variant;
  variant.position_type = IdType::Int64;
  // Rows of 8 float32: 8 guard rows (256 bytes) of NaN.
  Guarded<float> table({kD, kRows}, 8, NAN, target);
  for (int row = 0; row < kRows; ++row)
    for (int c = 0; c < kD; ++c) table.at(c, row) = learned ? 0.25f * row + 0.01f * c : std::cos(0.1f * (row + 1) * (c + 1));
  Inputs in;
  const int heads = learned ? 1 : kHeads;
  in.q = values(heads, 1.0f);
  Halide::Buffer<int64_t> positions(kTokens, 1);
  for (int t = 0; t < kTokens; ++t) positions(t, 0) = ids[t];
  in.positions = positions;
  (learned ? in.table : in.cos_sin_cache) = table.view();
  Halide::Buffer<float> out(kD, heads, kTokens, 1);
  run(spec, variant, target, in, {learned ? out : rotary_view(out)});
  return std::vector<float>(out.data(), out.data() + out.number_of_elements());
}

void expect_rows_clamped(const Halide::Target& target) {
  for (bool learned : {false, true}) {
    SCOPED_TRACE(std::string(learned ? "learned table" : "cos/sin cache") + " on " + target.to_string());
    const std::vector<float> bad = run_table(learned, bad_ids(), target), want = run_table(learned, clamped(bad_ids()), target);
    ASSERT_EQ(bad.size(), want.size());
    for (size_t i = 0; i < bad.size(); ++i) {
      ASSERT_FALSE(std::isnan(bad[i])) << "element " << i << " read a guard row";
      ASSERT_EQ(std::memcmp(&bad[i], &want[i], sizeof(float)), 0) << "element " << i << ": " << bad[i] << " vs " << want[i];
    }
  }
}

TEST(UncheckedIds, HostKvAppendSkipsTokensWithoutATarget) { expect_kv_tokens_skipped(Halide::get_host_target()); }
TEST(UncheckedIds, HostTableRowsAreClamped) { expect_rows_clamped(Halide::get_host_target()); }

// Halide 21's Vulkan allocator settings, as the runtime's kernels get
// them, before this process's first Vulkan buffer.
#define ROPEGEN_REQUIRE_VULKAN(v)  \
  ROPEGEN_REQUIRE_GPU(v, "vulkan"); \
  runtime::prepare_device_runtime(*v.target)

TEST(UncheckedIds, VulkanKvAppendSkipsTokensWithoutATarget) {
  ROPEGEN_REQUIRE_VULKAN(v);
  expect_kv_tokens_skipped(*v.target);
}
TEST(UncheckedIds, VulkanTableRowsAreClamped) {
  ROPEGEN_REQUIRE_VULKAN(v);
  expect_rows_clamped(*v.target);
}

}  // namespace
}  // namespace ropegen
