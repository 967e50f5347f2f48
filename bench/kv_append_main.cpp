// The fused RoPE + KV-cache append against rope-then-copy, on the host, in
// one run (build/bench/kv_append_bench): llama3-8B heads (q 32, k and v 8,
// head_dim 128), bf16, a paged_nhd cache of 16-entry pages.
//   fused           one call: q rotated in place, k rotated into k_cache,
//                   v copied into v_cache (spec section kv_cache)
//   rope_then_copy  k rotated out of place (q in place) by the same spec
//                   without kv_cache, then each token's k and v rows
//                   scatter-copied into the caches (memcpy per token: a
//                   token's [Hk, D] rows are one run in an NHD entry)
//   fused_fp8       the fused call into fp8_e4m3 caches (uint8 codes of
//                   x / scale, scales 0.02): the cost of the encoding
// Both sides on one thread (HL_NUM_THREADS=1, set here before any kernel;
// the copy is single-threaded), interleaved: 7 passes of a batch of runs of
// each side, the median of all runs. ratio = rope_then_copy time / fused
// time (> 1: the fused call is faster). One JSON line per case.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kHq = 32, kHk = 8, kD = 128, kPage = 16;

// kv_dtype: "" (no kv_cache section), or the cache's dtype.
ropegen::RopeSpec spec(const std::string& kv_dtype) {
  std::string text = "name: llama_kv\nhead_dim: 128\nlayout: thd\ndtype: bf16\npositions: explicit\n"
                     "frequency: {theta: 500000}\n";
  if (!kv_dtype.empty()) text += "kv_cache: {layout: paged_nhd, page_size: 16, dtype: " + kv_dtype + "}\n";
  return ropegen::parse_spec(text, "bench").value();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `requests` requests of `tokens` new tokens each, after `cached` cached ones.
void run_case(const char* name, int requests, int tokens, int cached, double seconds) {
  const int T = requests * tokens;
  const int pages_per_request = (cached + tokens + kPage - 1) / kPage;
  const int pages = requests * pages_per_request;
  std::mt19937 gen(1);
  std::vector<uint16_t> q(size_t(T) * kHq * kD), k(size_t(T) * kHk * kD), v(size_t(T) * kHk * kD), out_k(k.size());
  for (auto* t : {&q, &k, &v})
    for (uint16_t& x : *t) x = static_cast<uint16_t>(0x3f80 + gen() % 128);  // bf16 in [1, 2)
  std::vector<uint16_t> k_cache(size_t(pages) * kPage * kHk * kD), v_cache(k_cache.size());
  std::vector<int32_t> positions, batch, indptr = {0}, indices(pages);
  std::iota(indices.begin(), indices.end(), 0);
  std::shuffle(indices.begin(), indices.end(), gen);
  for (int b = 0; b < requests; ++b) {
    indptr.push_back(indptr.back() + pages_per_request);
    for (int i = 0; i < tokens; ++i) positions.push_back(cached + i), batch.push_back(b);
  }
  using ropegen::ElementType;
  using ropegen::Tensor;
  const int64_t n_t = T, n_pages = pages, n_indptr = requests + 1;
  ropegen::Call fused;
  fused.q = Tensor::dense(q.data(), ElementType::BFloat16, {T, kHq, kD});
  fused.k = Tensor::dense(k.data(), ElementType::BFloat16, {T, kHk, kD});
  fused.v = Tensor::dense(v.data(), ElementType::BFloat16, {T, kHk, kD});
  fused.k_cache = Tensor::dense(k_cache.data(), ElementType::BFloat16, {pages, kPage, kHk, kD});
  fused.v_cache = Tensor::dense(v_cache.data(), ElementType::BFloat16, {pages, kPage, kHk, kD});
  fused.positions = Tensor::dense(positions.data(), ElementType::Int32, &n_t, 1);
  fused.batch_indices = Tensor::dense(batch.data(), ElementType::Int32, &n_t, 1);
  fused.kv_indptr = Tensor::dense(indptr.data(), ElementType::Int32, &n_indptr, 1);
  fused.kv_indices = Tensor::dense(indices.data(), ElementType::Int32, &n_pages, 1);
  std::vector<uint8_t> k_codes(k_cache.size()), v_codes(v_cache.size());
  ropegen::Call fused_fp8 = fused;
  fused_fp8.k_cache = Tensor::dense(k_codes.data(), ElementType::UInt8, {pages, kPage, kHk, kD});
  fused_fp8.v_cache = Tensor::dense(v_codes.data(), ElementType::UInt8, {pages, kPage, kHk, kD});
  fused_fp8.k_scale = fused_fp8.v_scale = 0.02f;
  ropegen::Call rope;
  rope.q = fused.q, rope.k = fused.k, rope.positions = fused.positions;
  rope.out_k = Tensor::dense(out_k.data(), ElementType::BFloat16, {T, kHk, kD});

  ropegen::Runtime& runtime = ropegen::Runtime::process();
  ropegen::KernelVariant fused_variant, rope_variant;
  fused_variant.with_v = true;
  rope_variant.with_k = true;
  auto fused_kernel = runtime.get(spec("bf16"), fused_variant).value();
  auto fp8_kernel = runtime.get(spec("fp8_e4m3"), fused_variant).value();
  auto rope_kernel = runtime.get(spec(""), rope_variant).value();
  const size_t row = size_t(kHk) * kD;
  auto run_fused = [&] {
    if (!fused_kernel->run(fused)) std::abort();
  };
  auto run_fused_fp8 = [&] {
    if (!fp8_kernel->run(fused_fp8)) std::abort();
  };
  auto run_rope_then_copy = [&] {
    if (!rope_kernel->run(rope)) std::abort();
    for (int t = 0; t < T; ++t) {
      const int b = batch[t], p = positions[t];
      const size_t entry = (size_t(indices[indptr[b] + p / kPage]) * kPage + p % kPage) * row;
      std::memcpy(&k_cache[entry], &out_k[t * row], row * 2);
      std::memcpy(&v_cache[entry], &v[t * row], row * 2);
    }
  };
  run_fused(), run_fused_fp8(), run_rope_then_copy();  // untimed: compile, load, warm up
  auto time_us = [](auto&& f) {
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  const int batch_runs = std::max(1, static_cast<int>(seconds * 1e6 / 7 / std::max(1.0, time_us(run_fused))));
  std::vector<double> a, b, c;
  for (int pass = 0; pass < 7; ++pass) {
    for (int i = 0; i < batch_runs; ++i) a.push_back(time_us(run_fused));
    for (int i = 0; i < batch_runs; ++i) b.push_back(time_us(run_rope_then_copy));
    for (int i = 0; i < batch_runs; ++i) c.push_back(time_us(run_fused_fp8));
  }
  const double fa = median(a), fb = median(b), fc = median(c);
  std::printf("{\"case\": \"%s\", \"tokens\": %d, \"fused_us\": %.2f, \"rope_then_copy_us\": %.2f, \"ratio\": %.3f, "
              "\"fused_fp8_us\": %.2f}\n",
              name, T, fa, fb, fb / fa, fc);
}

}  // namespace

int main() {
  setenv("HL_NUM_THREADS", "1", /*overwrite=*/1);
  const char* s = std::getenv("BENCH_SECONDS");
  const double seconds = s ? std::atof(s) : 0.5;
  run_case("decode 64 x 1", 64, 1, 1000, seconds);
  run_case("prefill 1 x 512", 1, 512, 0, seconds);
  run_case("prefill 4 x 128", 4, 128, 64, seconds);
  return 0;
}
