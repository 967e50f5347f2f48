// The fused RoPE + KV-cache append against the float64 reference
// (tests/support/reference.h: reference_apply, then reference_kv_append).
//
// Every case fills its caches with a sentinel and checks each element:
// an entry a token goes to holds the reference's value (rotated k, v)
// within the cache dtype's rounding; every other element still holds the
// sentinel's bits. q (and out_k when asked) are checked against the
// reference too, and the cache's rows bit for bit against out_k when the
// dtypes agree. fp8 caches (uint8 codes of x / scale) are checked code
// by code: v's and, with a float32 out_k, k's codes are exactly the
// reference's fp8_code of the kernel's input; k's codes from the float64
// rotation lie between the codes of its value +- float32 rounding, within
// half the format's ulp at the scale. Each case prints its parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "kernels/gpu_parity.h"
#include "runtime/host_tensor.h"
#include "targets/device_code.h"
#include "targets/target_names.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "support/golden.h"
#include "support/reference.h"
#include "support/sweep_subset.h"

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
  float k_scale = 0, v_scale = 0;        // fp8 caches; 0: not given (1)
  bool multiply_scales = false;          // fp8_scale: multiply (codes of x * scale)
  bool specials = false;                 // saturating, NaN, infinite, tiny and zero values in k and v
  int rotation_offset = 0;               // paged: tokens rotate at their cache position + this (cache_positions)
  std::string qk_norm;                   // a qk_norm mapping ("{...}"); weight per_head: q's and k's passed
  std::string target = "host";

  bool fp8() const { return kv_dtype.rfind("fp8", 0) == 0; }
  Fp8Scale rule() const { return multiply_scales ? Fp8Scale::Multiply : Fp8Scale::Divide; }
  // What one unit of the codes' values is in x: scale, or 1 / scale.
  double unit(float scale) const { return multiply_scales ? 1.0 / scale : scale; }

  std::string spec_text() const {
    std::string kv = fmt::format("kv_cache: {{layout: {}, dtype: {}", layout, kv_dtype);
    if (layout != "contiguous") kv += fmt::format(", page_size: {}", page_size);
    return fmt::format(
        "name: kv\nhead_dim: {}\nrotary_dim: {}\npairing: {}\nlayout: thd\ndtype: {}\n"
        "positions: explicit\n{}}}\n{}{}",
        head_dim, rotary_dim, pairing, dtype, kv, qk_norm.empty() ? "" : "qk_norm: " + qk_norm + "\n",
        multiply_scales ? "fp8_scale: multiply\n" : "");
  }
};

void PrintTo(const KvCase& c, std::ostream* os) {
  *os << fmt::format(
      "{} [{} page_size {} {}->{} q{} k{} D{} rot{} v{} {} tokens {} cached {} padding {}{}{}{}{}{} {}]", c.name,
      c.layout, c.page_size, c.dtype, c.kv_dtype, c.q_heads, c.k_heads, c.head_dim, c.rotary_dim, c.v_dim, c.pairing,
      fmt::join(c.new_tokens, ","), fmt::join(c.cached, ","), c.padding, c.out_k ? " out_k" : "",
      c.fp8() ? fmt::format(" k_scale {} v_scale {} ({})", c.k_scale, c.v_scale, to_string(c.rule())) : "",
      c.specials ? " specials" : "",
      c.rotation_offset ? fmt::format(" rotated at cache position + {}", c.rotation_offset) : "",
      c.qk_norm.empty() ? "" : " qk_norm " + c.qk_norm, c.target);
}

DType dtype_of(const std::string& s) { return s == "f32" ? DType::F32 : s == "f16" ? DType::F16 : DType::BF16; }
KvDType fp8_of(const std::string& s) { return s == "fp8_e4m3" ? KvDType::Fp8E4m3 : KvDType::Fp8E5m2; }

std::vector<uint8_t> bytes_of(runtime::HostStorage& s) {
  const auto* p = static_cast<const uint8_t*>(s.data());
  return std::vector<uint8_t>(p, p + s.elements() * element_bytes(s.element_type()));
}

// A cache: float storage, or fp8 codes (uint8).
struct CacheBuffer {
  CacheBuffer(const std::string& kv_dtype, int64_t elements, float sentinel)
      : fp8(kv_dtype.rfind("fp8", 0) == 0),
        storage(runtime::to_storage(std::vector<float>(fp8 ? 0 : elements, sentinel), fp8 ? DType::F32 : dtype_of(kv_dtype))),
        codes(fp8 ? elements : 0, kSentinelCode) {}
  Tensor tensor(const std::vector<int64_t>& shape) {
    if (fp8) return Tensor::dense(codes.data(), ElementType::UInt8, shape.data(), static_cast<int>(shape.size()));
    return Tensor::dense(storage.data(), storage.element_type(), shape.data(), static_cast<int>(shape.size()));
  }
  std::vector<uint8_t> bytes() { return fp8 ? codes : bytes_of(storage); }
  static constexpr uint8_t kSentinelCode = 0x5a;
  bool fp8;
  runtime::HostStorage storage;
  std::vector<uint8_t> codes;
};

// What a case's call left in its caches (host and GPU runs compare them).
struct CacheBytes {
  std::vector<uint8_t> k_cache, v_cache;
};

// Values past the fp8 maxima, non-finite, tiny (the formats' subnormals
// and ties at their half steps, at the scale: `scale` is one unit of the
// codes) and signed zeros, written over the first elements of a tensor of
// normals.
void put_specials(std::vector<float>& values, float scale, bool infinities, uint32_t seed) {
  const float e4m3_step = std::ldexp(1.0f, -9) * scale, e5m2_step = std::ldexp(1.0f, -16) * scale;
  std::vector<float> specials = {1e6f * scale, -1e6f * scale, 460.0f * scale, 60000.0f * scale, NAN, -NAN, 0.0f, -0.0f, e4m3_step, 0.5f * e4m3_step, 1.5f * e4m3_step,
                                 -2.5f * e4m3_step, 7.5f * e4m3_step, e5m2_step, -0.5f * e5m2_step, 1.5f * e5m2_step,
                                 1e-30f, 448.0f * scale, 464.0f * scale, 57344.0f * scale, 61440.0f * scale};
  // Rotated, an infinity meets cos and sin: float32 and float64 may not
  // agree on inf against NaN where a cosine is nearly 0.
  if (infinities) specials.insert(specials.end(), {INFINITY, -INFINITY});
  std::mt19937 gen(seed);
  std::shuffle(specials.begin(), specials.end(), gen);
  for (size_t i = 0; i < specials.size() && i < values.size(); ++i) values[i * 3 % values.size()] = specials[i];
}

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

// Runs one case and checks it (see the top); returns the caches' bytes.
CacheBytes run_case(const KvCase& c) {
  SCOPED_TRACE(::testing::PrintToString(c));
  CacheBytes result;
  Result<RopeSpec> parsed = parse_spec(c.spec_text(), "case.yaml");
  EXPECT_TRUE(parsed) << format(parsed.errors());
  if (!parsed) return result;
  const RopeSpec spec = *parsed;
  const DType dt = dtype_of(c.dtype), kvt = c.fp8() ? DType::F32 : dtype_of(c.kv_dtype);
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
  const float k_scale = c.k_scale ? c.k_scale : 1.0f, v_scale = c.v_scale ? c.v_scale : 1.0f;
  std::vector<float> k_values = normal(elements(k_shape), 2), v_values = normal(c.v_dim ? elements(v_shape) : 0, 3);
  if (c.specials) {
    put_specials(k_values, static_cast<float>(c.unit(k_scale)), false, 4);
    put_specials(v_values, static_cast<float>(c.unit(v_scale)), true, 5);
  }
  runtime::HostStorage q = runtime::to_storage(normal(elements(q_shape), 1), dt);
  runtime::HostStorage k = runtime::to_storage(k_values, dt);
  runtime::HostStorage v = runtime::to_storage(v_values, dt);
  runtime::HostStorage out_k = k.empty_like();
  CacheBuffer k_cache(c.kv_dtype, elements(kc_shape), kSentinel);
  CacheBuffer v_cache(c.kv_dtype, c.v_dim ? elements(vc_shape) : 0, kSentinel);
  const std::vector<float> q_in = q.to_float(), k_in = k.to_float(), v_in = v.to_float();
  const std::vector<uint8_t> k_before = bytes_of(k);

  // ix.positions place the tokens; with rotation_offset they rotate elsewhere (cache_positions).
  std::vector<int64_t> rotated_at = ix.positions;
  for (int64_t& p : rotated_at) p += c.rotation_offset;
  std::vector<int32_t> positions = narrow(rotated_at), cache_positions = narrow(ix.positions);
  std::vector<int32_t> kv_indices = narrow(ix.kv_indices);
  std::vector<int32_t> kv_indptr = narrow(ix.kv_indptr), batch_indices = narrow(ix.batch_indices);
  std::vector<int32_t> slot_mapping = narrow(ix.slot_mapping);
  Call call;
  call.q = dense(q, q_shape);  // in place
  call.k = dense(k, k_shape);
  if (c.out_k) call.out_k = dense(out_k, k_shape);
  if (c.v_dim) call.v = dense(v, v_shape), call.v_cache = v_cache.tensor(vc_shape);
  call.k_cache = k_cache.tensor(kc_shape);
  if (c.k_scale) call.k_scale = c.k_scale;
  if (c.v_scale) call.v_scale = c.v_scale;
  call.positions = dense_ids(positions);
  if (paged) {
    call.kv_indices = dense_ids(kv_indices), call.kv_indptr = dense_ids(kv_indptr);
    call.batch_indices = dense_ids(batch_indices);
    if (c.rotation_offset) call.cache_positions = dense_ids(cache_positions);
  } else {
    call.slot_mapping = dense_ids(slot_mapping);
  }
  // qk_norm's weights near 1, exact in the dtype.
  std::vector<float> wq(c.head_dim), wk(c.head_dim);
  for (int i = 0; i < c.head_dim; ++i) wq[i] = 1.0f + 0.0625f * (i % 7), wk[i] = 1.5f - 0.03125f * (i % 5);
  runtime::HostStorage q_weight = runtime::to_storage(wq, dt), k_weight = runtime::to_storage(wk, dt);
  if (spec.qk_norm.has_weight())
    call.q_norm_weight = dense(q_weight, {c.head_dim}), call.k_norm_weight = dense(k_weight, {c.head_dim});
  const Status s = Runtime::process().run(spec, call, c.target);
  EXPECT_TRUE(s) << format(s.errors());
  if (!s) return result;
  result.k_cache = k_cache.bytes(), result.v_cache = v_cache.bytes();

  // The reference: q and k rotated in float64 (thd), then appended.
  ref::Call rc;
  rc.positions = ref::Tensor{{T}, std::vector<double>(rotated_at.begin(), rotated_at.end())};
  rc.q_norm_weight.assign(wq.begin(), wq.end()), rc.k_norm_weight.assign(wk.begin(), wk.end());
  const ref::Tensor q_ref = ref::reference_apply(spec, as_ref(q_shape, q_in), false, rc);
  const ref::Tensor k_ref = ref::reference_apply(spec, as_ref(k_shape, k_in), true, rc);
  auto expect_near = [&](const std::vector<float>& got, const std::vector<double>& want, DType t, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << what << "[" << i << "]";
        continue;
      }
      if (std::isinf(want[i]) || std::fabs(want[i]) > 1e30) continue;  // specials: a rotated infinity or its neighbour
      ASSERT_LE(std::fabs(got[i] - want[i]), tolerance(t) * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
    }
  };
  expect_near(q.to_float(), q_ref.data, dt, "q (in place)");
  if (c.out_k) expect_near(out_k.to_float(), k_ref.data, dt, "out_k");
  else EXPECT_EQ(bytes_of(k), k_before) << "k is not written without out_k";

  // fp8: the code of a float64 value w rotated in float32 lies between the
  // codes of w -+ float32 rounding (fp8_code is monotone) and within half
  // an ulp of the format at the scale; `exact` rows (v, and k's float32
  // out_k) give exactly fp8_code of the same float.
  const KvDType fp8_format = c.fp8() ? fp8_of(c.kv_dtype) : KvDType::F32;
  auto check_fp8 = [&](uint8_t got, double w, float scale, std::optional<float> exact, const std::string& where) {
    if (exact) {
      ASSERT_EQ(got, ref::fp8_code(fp8_format, *exact, scale, c.rule())) << where << " of " << *exact << ", " << scale;
      return;
    }
    if (std::isnan(w)) {
      ASSERT_EQ(got & 0x7f, 0x7f) << where << ": NaN";
      return;
    }
    const double eps = std::isinf(w) ? 0 : 1e-5 * (1 + std::fabs(w));
    const double lo =
        ref::fp8_value(fp8_format, ref::fp8_code(fp8_format, static_cast<float>(w - eps), scale, c.rule()));
    const double hi =
        ref::fp8_value(fp8_format, ref::fp8_code(fp8_format, static_cast<float>(w + eps), scale, c.rule()));
    const double v = ref::fp8_value(fp8_format, got);
    ASSERT_TRUE(lo <= v && v <= hi) << where << ": code " << int(got) << " = " << v << " for " << w << ", " << scale
                                    << " not in [" << lo << ", " << hi << "]";
    const double x = w / c.unit(scale);
    if (std::fabs(x) <= ref::fp8_max(fp8_format)) {
      const int m = got & 0x7f;
      const double up = ref::fp8_value(fp8_format, static_cast<uint8_t>(std::min(m + 1, 0x7e))), at = ref::fp8_value(fp8_format, m);
      const double down = m > 0 ? ref::fp8_value(fp8_format, static_cast<uint8_t>(m - 1)) : 0;
      ASSERT_LE(std::fabs(v - x), std::max(up - at, at - down) / 2 + eps / c.unit(scale)) << where << ": half an ulp";
    }
  };

  auto check_cache = [&](CacheBuffer& got_cache, const std::vector<int64_t>& shape, const ref::Tensor& rows, float scale,
                         const std::vector<float>* exact_rows, const char* what) {
    ref::Tensor want{shape, std::vector<double>(elements(shape), kSentinel)};
    ref::Tensor touched{shape, std::vector<double>(elements(shape), 0.0)};
    ref::reference_kv_append(spec, rows, ix, want);
    ref::reference_kv_append(spec, {rows.shape, std::vector<double>(rows.data.size(), 1.0)}, ix, touched);
    int64_t written = 0;
    if (got_cache.fp8) {
      // Which row element each cache entry holds, to find the exact input.
      ref::Tensor source{shape, std::vector<double>(elements(shape), -1.0)};
      std::vector<double> flat(rows.data.size());
      std::iota(flat.begin(), flat.end(), 0.0);
      ref::reference_kv_append(spec, {rows.shape, flat}, ix, source);
      for (size_t i = 0; i < got_cache.codes.size(); ++i) {
        if (touched.data[i] == 0) {
          ASSERT_EQ(got_cache.codes[i], CacheBuffer::kSentinelCode) << what << "[" << i << "] was written but no token goes there";
          continue;
        }
        ++written;
        const size_t from = static_cast<size_t>(source.data[i]);
        const std::optional<float> exact = exact_rows ? std::optional<float>((*exact_rows)[from]) : std::nullopt;
        check_fp8(got_cache.codes[i], want.data[i], scale, exact, fmt::format("{}[{}]", what, i));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    const std::vector<float> got = got_cache.fp8 ? std::vector<float>() : got_cache.storage.to_float();
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
  // fp8: a float32 out_k holds the very floats k's codes are made from.
  const std::vector<float> out_k_values = out_k.to_float();
  const bool exact_k = c.fp8() && c.out_k && dt == DType::F32;
  check_cache(k_cache, kc_shape, k_ref, k_scale, exact_k ? &out_k_values : nullptr, "k_cache");
  if (c.v_dim) check_cache(v_cache, vc_shape, as_ref(v_shape, v_in), v_scale, &v_in, "v_cache");

  // Same dtypes: the cache holds out_k's bits (and v's).
  if (c.out_k && !c.fp8() && dt == kvt) {
    ref::Tensor from_out_k = as_ref(k_shape, out_k.to_float()), cache_rows{kc_shape, {}};
    ref::Tensor want{kc_shape, std::vector<double>(elements(kc_shape), kSentinel)};
    ref::reference_kv_append(spec, from_out_k, ix, want);
    const std::vector<float> got = k_cache.storage.to_float();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], static_cast<float>(want.data[i])) << "k_cache vs out_k [" << i << "]";
      if (got[i] != static_cast<float>(want.data[i])) break;
    }
  }
  return result;
}

class KvAppend : public ::testing::TestWithParam<KvCase> {};
TEST_P(KvAppend, MatchesReferenceAndWritesOnlyAddressedEntries) { run_case(GetParam()); }

// fp8 caches: both formats on every layout with scales != 1 (float32
// out_k: k's codes exact), saturating, NaN, tiny and zero values; a bf16
// spec with partial rotary, MLA without v, and the default scale.
std::vector<KvCase> fp8_cases() {
  std::vector<KvCase> out;
  for (std::string format : {"fp8_e4m3", "fp8_e5m2"})
    for (std::string layout : {"paged_nhd", "paged_hnd", "contiguous"}) {
      KvCase c;
      c.name = "fp8", c.kv_dtype = format, c.layout = layout, c.page_size = 4, c.out_k = true;
      c.new_tokens = {5, 1, 9}, c.cached = {0, 6, 3}, c.padding = 1;
      c.k_scale = format == "fp8_e4m3" ? 0.37f : 3.0f, c.v_scale = format == "fp8_e4m3" ? 0.05f : 2.5f;
      c.specials = true;
      out.push_back(c);
    }
  KvCase partial;
  partial.name = "fp8_partial_bf16", partial.kv_dtype = "fp8_e4m3", partial.dtype = "bf16", partial.head_dim = 32,
  partial.rotary_dim = 16, partial.pairing = "interleaved", partial.layout = "paged_hnd", partial.page_size = 4,
  partial.k_scale = 0.02f, partial.v_scale = 0.011f;
  out.push_back(partial);
  KvCase mla;
  mla.name = "fp8_mla_no_v", mla.kv_dtype = "fp8_e5m2", mla.head_dim = 192, mla.rotary_dim = 64, mla.v_dim = 0,
  mla.q_heads = 2, mla.k_heads = 1, mla.page_size = 64, mla.new_tokens = {70, 2}, mla.cached = {0, 63},
  mla.k_scale = 0.125f, mla.out_k = true;
  out.push_back(mla);
  KvCase unscaled;
  unscaled.name = "fp8_default_scale", unscaled.kv_dtype = "fp8_e4m3", unscaled.dtype = "f16", unscaled.specials = true;
  out.push_back(unscaled);
  KvCase placed;  // FlashInfer's fused op: pos_ids rotate, positions place
  placed.name = "fp8_cache_positions", placed.kv_dtype = "fp8_e5m2", placed.page_size = 4, placed.out_k = true,
  placed.k_scale = 0.25f, placed.v_scale = 0.5f, placed.new_tokens = {6, 2}, placed.cached = {1, 9},
  placed.rotation_offset = 1000, placed.padding = 1;
  out.push_back(placed);
  KvCase multiplied;  // FlashInfer's rule: codes of x * scale (a scale on the wrong side fails every check)
  multiplied.name = "fp8_multiply", multiplied.kv_dtype = "fp8_e4m3", multiplied.dtype = "bf16",
  multiplied.head_dim = 48, multiplied.rotary_dim = 16, multiplied.layout = "paged_hnd", multiplied.page_size = 4,
  multiplied.k_scale = 37.3f, multiplied.v_scale = 0.61f, multiplied.multiply_scales = true, multiplied.specials = true,
  multiplied.out_k = true;
  out.push_back(multiplied);
  return out;
}

// qk_norm with the append: the caches get normalised, rotated k (the dims
// past the rotary range normalised) and v as it is; Gemma's 1 + w on a
// partial interleaved bf16 row with out_k, and no weight into an fp8 cache.
std::vector<KvCase> qk_norm_cases() {
  KvCase gemma;
  gemma.name = "qk_norm", gemma.dtype = gemma.kv_dtype = "bf16", gemma.head_dim = 64, gemma.rotary_dim = 32;
  gemma.v_dim = 64, gemma.pairing = "interleaved", gemma.out_k = true, gemma.page_size = 4, gemma.padding = 1;
  gemma.qk_norm = "{type: rms_one_plus, eps: 1.0e-6, weight: per_head}";
  KvCase fp8;
  fp8.name = "qk_norm", fp8.layout = "contiguous", fp8.kv_dtype = "fp8_e4m3", fp8.k_scale = 0.5f, fp8.v_scale = 2.0f;
  fp8.head_dim = fp8.rotary_dim = fp8.v_dim = 128, fp8.q_heads = 8, fp8.k_heads = 2;
  fp8.qk_norm = "{eps: 0.001, weight: none}";
  return {gemma, fp8};
}

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
  for (std::string layout : {"paged_nhd", "paged_hnd"}) {
    KvCase placed;  // cache_positions: tokens rotate at other positions than they go to
    placed.name = "cache_positions", placed.layout = layout, placed.page_size = 4, placed.out_k = true,
    placed.new_tokens = {5, 3}, placed.cached = {2, 0}, placed.rotation_offset = 37, placed.padding = 2;
    out.push_back(placed);
  }
  // fp8 (appended: the GPU tests pick cases by index).
  const std::vector<KvCase> fp8 = fp8_cases();
  out.insert(out.end(), fp8.begin(), fp8.end());
  const std::vector<KvCase> norm = qk_norm_cases();
  out.insert(out.end(), norm.begin(), norm.end());
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

TEST(KvAppendVulkan, QkNormMatchesReference) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  for (KvCase c : qk_norm_cases()) {
    c.target = v.target->to_string();
    run_case(c);
  }
}

// Equal codes, or both NaN: which NaN a rotation returns is not specified,
// only that it is one (lowering/fma.h: with two NaN operands an FMA
// instruction returns the one its encoding puts first, the compiler's choice).
bool same_fp8_codes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, const std::string& kv_dtype) {
  auto is_nan = [&](uint8_t code) {
    return kv_dtype == "fp8_e4m3" ? (code & 0x7f) == 0x7f : (code & 0x7f) > 0x7c;
  };
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && !(is_nan(got[i]) && is_nan(want[i]))) return false;
  return true;
}

// fp8 on Vulkan: every fp8 case, checked against the reference and bit
// for bit against the host's caches.
TEST(KvAppendVulkan, Fp8CachesMatchTheHostBitForBit) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  for (const KvCase& host : test::sweep_subset(fp8_cases())) {
    const CacheBytes want = run_case(host);
    KvCase c = host;
    c.target = v.target->to_string();
    const CacheBytes got = run_case(c);
    EXPECT_TRUE(same_fp8_codes(got.k_cache, want.k_cache, c.kv_dtype)) << "k_cache: " << ::testing::PrintToString(c);
    EXPECT_TRUE(got.v_cache == want.v_cache) << "v_cache: " << ::testing::PrintToString(c);
  }
}

// The encoder through the kernel: v (float32) copied into a contiguous
// fp8 cache holds torch's own float8 codes of clamp(v / v_scale) (and with
// fp8_scale: multiply, of clamp(v * v_scale)) for every input of
// tests/golden/data/fp8/fp8_codes.json (every fp8 value, the midpoints and
// their float32 neighbours, specials), on the host and on Vulkan.
void expect_golden_codes(const std::string& target) {
  std::ifstream in(test::golden_dir() + "/fp8/fp8_codes.json");
  ASSERT_TRUE(in) << "tests/golden/data/fp8/fp8_codes.json";
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::vector<uint32_t> bits = j["x_bits"].get<std::vector<uint32_t>>();
  const std::vector<float> scales = j["scales"].get<std::vector<float>>();
  constexpr int64_t kDv = 32, kD = 8;
  const int64_t T = (static_cast<int64_t>(bits.size()) + kDv - 1) / kDv;
  std::vector<float> v(T * kDv, 0.0f), k(T * kD, 0.5f), q(T * kD, 0.25f);
  std::memcpy(v.data(), bits.data(), bits.size() * sizeof(float));
  std::vector<int32_t> slots(T), positions(T);
  std::iota(slots.begin(), slots.end(), 0);
  std::iota(positions.begin(), positions.end(), 0);
  for (const auto& [rule, key] : {std::pair{"divide", "codes"}, std::pair{"multiply", "codes_multiply"}})
    for (const char* name : {"fp8_e4m3", "fp8_e5m2"}) {
      const RopeSpec spec = *parse_spec(fmt::format("name: kv\nhead_dim: {}\nlayout: thd\npositions: explicit\n"
                                                    "kv_cache: {{layout: contiguous, dtype: {}}}\nfp8_scale: {}\n",
                                                    kD, name, rule),
                                        "case.yaml");
      for (size_t s = 0; s < scales.size(); ++s) {
        std::vector<uint8_t> k_cache(T * kD), v_cache(T * kDv);
        Call call;
        call.q = Tensor::dense(q.data(), ElementType::Float32, {T, 1, kD});
        call.k = Tensor::dense(k.data(), ElementType::Float32, {T, 1, kD});
        call.v = Tensor::dense(v.data(), ElementType::Float32, {T, 1, kDv});
        call.k_cache = Tensor::dense(k_cache.data(), ElementType::UInt8, {T, 1, kD});
        call.v_cache = Tensor::dense(v_cache.data(), ElementType::UInt8, {T, 1, kDv});
        call.positions = dense_ids(positions), call.slot_mapping = dense_ids(slots);
        call.v_scale = scales[s];
        const Status st = Runtime::process().run(spec, call, target);
        ASSERT_TRUE(st) << format(st.errors());
        const std::vector<int> want = j[key][name][s].get<std::vector<int>>();
        for (size_t i = 0; i < bits.size(); ++i)
          ASSERT_EQ(v_cache[i], want[i]) << target << " " << name << " " << rule << " scale " << scales[s] << ": v "
                                         << v[i] << " (bits " << std::hex << bits[i] << std::dec << ")";
      }
    }
}

TEST(KvAppendFp8, HostCodesAreTorchsForEveryGoldenInput) { expect_golden_codes("host"); }

TEST(KvAppendFp8, VulkanCodesAreTorchsForEveryGoldenInput) {
  ROPEGEN_REQUIRE_GPU(v, "vulkan");
  expect_golden_codes(v.target->to_string());
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
  for (const char* fp8 : {"fp8_e4m3", "fp8_e5m2"}) {
    KvCase c;
    c.layout = "paged_hnd", c.dtype = "bf16", c.kv_dtype = fp8, c.head_dim = 192, c.rotary_dim = 64;
    const RopeSpec spec = *parse_spec(c.spec_text(), "case.yaml");
    lowering::KernelVariant variant;
    variant.with_v = true;
    const Result<std::string> ptx = targets::cuda_ptx(spec, variant, *targets::parse_target("host-cuda"));
    ASSERT_TRUE(ptx.ok()) << fp8 << ": " << format(ptx.errors());
    EXPECT_NE(ptx->find("v_cache"), std::string::npos) << fp8;
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
