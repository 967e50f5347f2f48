// The fused RoPE + KV-cache append against the float64 reference
// (tests/support/reference.h: reference_apply, then reference_kv_append).
//
// Every case fills its caches with a sentinel and checks each element:
// an entry a token goes to holds the reference's value (rotated k, v)
// within the cache dtype's rounding; every other element still holds the
// sentinel's bits. q (and out_k when asked) are checked against the
// reference too, and the cache's rows bit for bit against out_k when the
// dtypes agree. Each case prints its parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "kernels/gpu_parity.h"
#include "runtime/host_tensor.h"
#include "targets/device_code.h"
#include "targets/target_names.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "support/reference.h"

namespace ropegen {
namespace {

struct KvCase {
  std::string name;
  std::string layout = "paged_nhd";
  int page_size = 16;
  std::string dtype = "f32", kv_dtype = "f32";
  int q_heads = 4, k_heads = 2, head_dim = 16, rotary_dim = 16;
  int v_dim = 16;                       // 0: no v (MLA)
  std::string pairing = "half";
  std::vector<int> new_tokens = {3, 1};  // per request
  std::vector<int> cached = {0, 5};      // tokens already in each request's cache
  int padding = 0;                       // trailing tokens not appended (batch index / slot -1)
  bool out_k = false;
  std::string target = "host";

  std::string spec_text() const {
    std::string kv = fmt::format("kv_cache: {{layout: {}, dtype: {}", layout, kv_dtype);
    if (layout != "contiguous") kv += fmt::format(", page_size: {}", page_size);
    return fmt::format("name: kv\nhead_dim: {}\nrotary_dim: {}\npairing: {}\nlayout: thd\ndtype: {}\n"
                       "positions: explicit\n{}}}\n",
                       head_dim, rotary_dim, pairing, dtype, kv);
  }
};

void PrintTo(const KvCase& c, std::ostream* os) {
  *os << fmt::format("{} [{} page_size {} {}->{} q{} k{} D{} rot{} v{} {} tokens {} cached {} padding {}{} {}]",
                     c.name, c.layout, c.page_size, c.dtype, c.kv_dtype, c.q_heads, c.k_heads, c.head_dim,
                     c.rotary_dim, c.v_dim, c.pairing, fmt::join(c.new_tokens, ","), fmt::join(c.cached, ","),
                     c.padding, c.out_k ? " out_k" : "", c.target);
}

DType dtype_of(const std::string& s) { return s == "f32" ? DType::F32 : s == "f16" ? DType::F16 : DType::BF16; }

// Relative rounding of a float stored in `t`, and a margin for float32 arithmetic.
double tolerance(DType t) { return t == DType::F32 ? 2e-6 : t == DType::F16 ? 1.5e-3 : 1e-2; }

std::vector<float> normal(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> out(n);
  for (float& v : out) v = dist(gen);
  return out;
}

ref::Tensor as_ref(const std::vector<int64_t>& shape, const std::vector<float>& v) {
  return {shape, std::vector<double>(v.begin(), v.end())};
}

Tensor dense(runtime::HostStorage& s, const std::vector<int64_t>& shape) {
  return Tensor::dense(s.data(), s.element_type(), shape.data(), static_cast<int>(shape.size()));
}
Tensor dense_ids(std::vector<int32_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  return Tensor::dense(ids.data(), ElementType::Int32, &n, 1);
}
std::vector<int32_t> narrow(const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

// Runs one case and checks it (see the top).
void run_case(const KvCase& c) {
  SCOPED_TRACE(::testing::PrintToString(c));
  Result<RopeSpec> parsed = parse_spec(c.spec_text(), "case.yaml");
  ASSERT_TRUE(parsed) << format(parsed.errors());
  const RopeSpec spec = *parsed;
  const DType dt = dtype_of(c.dtype), kvt = dtype_of(c.kv_dtype);
  const bool paged = c.layout != "contiguous";
  const int ps = paged ? c.page_size : 1;
  std::mt19937 gen(7);

  // Tokens of each request, at positions cached .. cached + new - 1 (FlashInfer's get_batch_indices_positions).
  ref::KvIndices ix;
  const int B = static_cast<int>(c.new_tokens.size());
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < c.new_tokens[b]; ++i) ix.batch_indices.push_back(b), ix.positions.push_back(c.cached[b] + i);
  for (int i = 0; i < c.padding; ++i) ix.batch_indices.push_back(-1), ix.positions.push_back(i % 3);
  const int64_t T = static_cast<int64_t>(ix.positions.size());
  int64_t pages = 0;
  if (paged) {
    // Each request's pages, then two no token uses, all shuffled.
    std::vector<int64_t> counts;
    for (int b = 0; b < B; ++b) counts.push_back((c.cached[b] + c.new_tokens[b] + ps - 1) / ps), pages += counts.back();
    pages += 2;
    std::vector<int64_t> pool(pages);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), gen);
    ix.kv_indptr = {0};
    for (int b = 0; b < B; ++b) ix.kv_indptr.push_back(ix.kv_indptr.back() + counts[b]);
    ix.kv_indices.assign(pool.begin(), pool.begin() + ix.kv_indptr.back());
  } else {
    pages = T + 3;  // slots
    std::vector<int64_t> pool(pages);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), gen);
    for (int64_t t = 0; t < T; ++t) ix.slot_mapping.push_back(ix.batch_indices[t] < 0 ? -1 : pool[t]);
  }

  auto cache_shape = [&](int64_t dim) -> std::vector<int64_t> {
    if (c.layout == "paged_nhd") return {pages, ps, c.k_heads, dim};
    if (c.layout == "paged_hnd") return {pages, c.k_heads, ps, dim};
    return {pages, c.k_heads, dim};
  };
  auto elements = [](const std::vector<int64_t>& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); };

  const std::vector<int64_t> q_shape = {T, c.q_heads, c.head_dim}, k_shape = {T, c.k_heads, c.head_dim};
  const std::vector<int64_t> v_shape = {T, c.k_heads, c.v_dim};
  const std::vector<int64_t> kc_shape = cache_shape(c.head_dim), vc_shape = cache_shape(c.v_dim);
  constexpr float kSentinel = -77.0f;  // exact in every dtype
  runtime::HostStorage q = runtime::to_storage(normal(elements(q_shape), 1), dt);
  runtime::HostStorage k = runtime::to_storage(normal(elements(k_shape), 2), dt);
  runtime::HostStorage v = runtime::to_storage(normal(c.v_dim ? elements(v_shape) : 0, 3), dt);
  runtime::HostStorage out_k = k.empty_like();
  runtime::HostStorage k_cache = runtime::to_storage(std::vector<float>(elements(kc_shape), kSentinel), kvt);
  runtime::HostStorage v_cache = runtime::to_storage(std::vector<float>(c.v_dim ? elements(vc_shape) : 0, kSentinel), kvt);
  const std::vector<float> q_in = q.to_float(), k_in = k.to_float(), v_in = v.to_float();
  const std::vector<float> k_before = k.to_float();

  std::vector<int32_t> positions = narrow(ix.positions), kv_indices = narrow(ix.kv_indices);
  std::vector<int32_t> kv_indptr = narrow(ix.kv_indptr), batch_indices = narrow(ix.batch_indices);
  std::vector<int32_t> slot_mapping = narrow(ix.slot_mapping);
  Call call;
  call.q = dense(q, q_shape);  // in place
  call.k = dense(k, k_shape);
  if (c.out_k) call.out_k = dense(out_k, k_shape);
  if (c.v_dim) call.v = dense(v, v_shape), call.v_cache = dense(v_cache, vc_shape);
  call.k_cache = dense(k_cache, kc_shape);
  call.positions = dense_ids(positions);
  if (paged) {
    call.kv_indices = dense_ids(kv_indices), call.kv_indptr = dense_ids(kv_indptr);
    call.batch_indices = dense_ids(batch_indices);
  } else {
    call.slot_mapping = dense_ids(slot_mapping);
  }
  const Status s = Runtime::process().run(spec, call, c.target);
  ASSERT_TRUE(s) << format(s.errors());

  // The reference: q and k rotated in float64 (thd), then appended.
  ref::Call rc;
  rc.positions = ref::Tensor{{T}, std::vector<double>(ix.positions.begin(), ix.positions.end())};
  const ref::Tensor q_ref = ref::reference_apply(spec, as_ref(q_shape, q_in), false, rc);
  const ref::Tensor k_ref = ref::reference_apply(spec, as_ref(k_shape, k_in), true, rc);
  auto expect_near = [&](const std::vector<float>& got, const std::vector<double>& want, DType t, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::fabs(got[i] - want[i]), tolerance(t) * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
  };
  expect_near(q.to_float(), q_ref.data, dt, "q (in place)");
  if (c.out_k) expect_near(out_k.to_float(), k_ref.data, dt, "out_k");
  else EXPECT_EQ(k.to_float(), k_before) << "k is not written without out_k";

  auto check_cache = [&](runtime::HostStorage& got_cache, const std::vector<int64_t>& shape, const ref::Tensor& rows,
                         const char* what) {
    ref::Tensor want{shape, std::vector<double>(elements(shape), kSentinel)};
    ref::Tensor touched{shape, std::vector<double>(elements(shape), 0.0)};
    ref::reference_kv_append(spec, rows, ix, want);
    ref::reference_kv_append(spec, {rows.shape, std::vector<double>(rows.data.size(), 1.0)}, ix, touched);
    const std::vector<float> got = got_cache.to_float();
    int64_t written = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (touched.data[i] == 0) {
        ASSERT_EQ(got[i], kSentinel) << what << "[" << i << "] was written but no token goes there";
        continue;
      }
      ++written;
      // float32 rotation (dtype rounding), then the cache dtype's.
      ASSERT_LE(std::fabs(got[i] - want.data[i]), (tolerance(dt) + tolerance(kvt)) * (1 + std::fabs(want.data[i])))
          << what << "[" << i << "]";
    }
    int64_t appended = 0;
    for (int64_t t = 0; t < T; ++t) appended += ix.batch_indices[t] >= 0;
    EXPECT_EQ(written, appended * rows.shape[1] * rows.shape[2]) << what;
  };
  check_cache(k_cache, kc_shape, k_ref, "k_cache");
  if (c.v_dim) check_cache(v_cache, vc_shape, as_ref(v_shape, v_in), "v_cache");

  // Same dtypes: the cache holds out_k's bits (and v's).
  if (c.out_k && dt == kvt) {
    ref::Tensor from_out_k = as_ref(k_shape, out_k.to_float()), cache_rows{kc_shape, {}};
    ref::Tensor want{kc_shape, std::vector<double>(elements(kc_shape), kSentinel)};
    ref::reference_kv_append(spec, from_out_k, ix, want);
    const std::vector<float> got = k_cache.to_float();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(want.data[i])) << "k_cache vs out_k [" << i << "]";
  }
}

class KvAppend : public ::testing::TestWithParam<KvCase> {};
TEST_P(KvAppend, MatchesReferenceAndWritesOnlyAddressedEntries) { run_case(GetParam()); }

std::vector<KvCase> host_cases() {
  std::vector<KvCase> out;
  for (std::string layout : {"paged_nhd", "paged_hnd", "contiguous"})
    for (int ps : {1, 16, 64}) {
      if (layout == "contiguous" && ps != 1) continue;
      KvCase c;
      c.name = "layouts", c.layout = layout, c.page_size = ps;
      c.new_tokens = {3, 1, 20}, c.cached = {0, 17, 40}, c.padding = 2;
      out.push_back(c);
    }
  KvCase gqa;
  gqa.name = "gqa_out_k", gqa.q_heads = 8, gqa.k_heads = 2, gqa.out_k = true, gqa.head_dim = 64, gqa.rotary_dim = 64,
  gqa.v_dim = 64;
  out.push_back(gqa);
  KvCase partial;
  partial.name = "partial_rotary", partial.head_dim = 32, partial.rotary_dim = 16, partial.out_k = true,
  partial.pairing = "interleaved", partial.layout = "paged_hnd", partial.page_size = 4;
  out.push_back(partial);
  KvCase mla;  // DeepSeek MLA-like: rope 64 + nope 128 in one row, no v
  mla.name = "mla_no_v", mla.head_dim = 192, mla.rotary_dim = 64, mla.v_dim = 0, mla.q_heads = 2, mla.k_heads = 1,
  mla.page_size = 64, mla.new_tokens = {70, 2}, mla.cached = {0, 63};
  out.push_back(mla);
  KvCase mla_v = mla;
  mla_v.name = "mla_v_separate", mla_v.v_dim = 128, mla_v.layout = "contiguous";
  out.push_back(mla_v);
  for (auto [dtype, kv] : {std::pair{"bf16", "bf16"}, std::pair{"f16", "f16"}, std::pair{"bf16", "f32"},
                           std::pair{"f32", "bf16"}, std::pair{"f16", "bf16"}}) {
    KvCase c;
    c.name = "dtypes", c.dtype = dtype, c.kv_dtype = kv, c.out_k = true, c.padding = 1;
    out.push_back(c);
  }
  KvCase skipped;
  skipped.name = "all_padding", skipped.new_tokens = {0, 0}, skipped.padding = 4;
  out.push_back(skipped);
  return out;
}
INSTANTIATE_TEST_SUITE_P(Host, KvAppend, ::testing::ValuesIn(host_cases()));

// Vulkan for real (lavapipe): every layout, dtypes, MLA without v, out_k.
TEST(KvAppendVulkan, MatchesReferenceAndWritesOnlyAddressedEntries) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  const std::vector<KvCase> all = host_cases();
  for (size_t i : {0, 4, 6, 7, 8, 9, 11, 13, 16}) {
    KvCase c = all.at(i);
    c.target = v.target->to_string();
    run_case(c);
  }
}

// CUDA: nothing runs here; the kernels must compile for every layout (and
// run, against the reference, where a device is).
TEST(KvAppendCuda, CompilesForEveryLayoutAndRunsWhereADeviceIs) {
  for (const char* layout : {"paged_nhd", "paged_hnd", "contiguous"})
    for (bool with_v : {false, true}) {
      KvCase c;
      c.layout = layout, c.dtype = "bf16", c.kv_dtype = "bf16", c.head_dim = 192, c.rotary_dim = 64;
      const RopeSpec spec = *parse_spec(c.spec_text(), "case.yaml");
      lowering::KernelVariant variant;
      variant.with_v = with_v;
      const Result<std::string> ptx = targets::cuda_ptx(spec, variant, *targets::parse_target("host-cuda"));
      ASSERT_TRUE(ptx.ok()) << layout << (with_v ? " with v: " : ": ") << format(ptx.errors());
      EXPECT_NE(ptx->find("k_cache"), std::string::npos) << layout;
    }
  ROPEGEN_REQUIRE_GPU(cuda, "cuda");
  for (const KvCase& host : host_cases()) {
    KvCase c = host;
    c.target = cuda.target->to_string();
    run_case(c);
  }
}

}  // namespace
}  // namespace ropegen
