#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "kit_call.h"
#include "kit_library.h"
#include "memory.h"

namespace kit {
namespace {

// One bench row: libs/<lib>.so (gpu_kit/bench/<lib>.yaml), q and k heads
// of head_dim, in the spec's layout and dtype, at each token count.
struct BenchCase {
  const char* lib;
  const char* label;
  bool thd, f32;
  int q_heads, k_heads, head_dim;
  int axes;  // M-RoPE: ids per token (explicit positions)
  bool backward;
  std::vector<int64_t> tokens;
};

const std::vector<BenchCase>& bench_cases() {
  static const std::vector<BenchCase> cases = {
      {"kit_llama3_bshd", "llama3 bshd bf16", false, false, 32, 8, 128, 0, false, {1, 64, 512, 8192, 32768}},
      {"kit_llama3_thd", "llama3 thd bf16", true, false, 32, 8, 128, 0, false, {1, 64, 512, 8192, 32768}},
      {"kit_yarn_bshd", "yarn bshd bf16", false, false, 32, 8, 128, 0, false, {1, 64, 512, 8192, 32768}},
      {"kit_deepseek_mla", "DeepSeek-V3 MLA rope thd bf16 (q 128 x 64, k_pe 1 x 64)", true, false, 128, 1, 64, 0, false, {64, 8192}},
      {"kit_qwen2vl_mrope", "Qwen2-VL M-RoPE bshd bf16", false, false, 32, 8, 128, 3, false, {64, 8192}},
      {"kit_llama3_bshd_f32", "llama3 bshd f32", false, true, 32, 8, 128, 0, false, {8192}},
      {"kit_llama3_bshd", "llama3 bshd bf16 backward", false, false, 32, 8, 128, 0, true, {8192}},
  };
  return cases;
}

uint16_t to_bf16(float f) {  // round to nearest even (finite inputs)
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

TensorData random_tensor(std::vector<int64_t> shape, bool f32, std::mt19937& rng) {
  TensorData t;
  t.dtype = f32 ? ropegen_dtype{ROPEGEN_DTYPE_FLOAT, 32, 1} : ropegen_dtype{ROPEGEN_DTYPE_BFLOAT, 16, 1};
  t.shape = std::move(shape);
  t.bytes.resize(t.size_in_bytes());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.elements(); ++i) {
    const float v = normal(rng);
    if (f32) std::memcpy(&t.bytes[i * 4], &v, 4);
    else {
      const uint16_t h = to_bf16(v);
      std::memcpy(&t.bytes[i * 2], &h, 2);
    }
  }
  return t;
}

TensorData int32_tensor(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  TensorData t;
  t.dtype = {ROPEGEN_DTYPE_INT, 32, 1};
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * 4);
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// The call: decode sizes (<= 64 tokens) as one token of each of `tokens`
// requests at position 4096; longer ones as one sequence from position 0.
KitCase make_case(const BenchCase& b, int64_t tokens) {
  std::mt19937 rng(7);
  KitCase c;
  const bool decode = tokens <= 64;
  auto shape = [&](int heads) -> std::vector<int64_t> {
    if (b.thd) return {tokens, heads, b.head_dim};
    return decode ? std::vector<int64_t>{tokens, 1, heads, b.head_dim} : std::vector<int64_t>{1, tokens, heads, b.head_dim};
  };
  c.inputs["q"] = random_tensor(shape(b.q_heads), b.f32, rng);
  c.inputs["k"] = random_tensor(shape(b.k_heads), b.f32, rng);
  if (b.thd) {
    std::vector<int32_t> cu = {0};
    if (decode)
      for (int64_t t = 1; t <= tokens; ++t) cu.push_back(static_cast<int32_t>(t));
    else
      cu.push_back(static_cast<int32_t>(tokens));
    c.inputs["cu_seqlens"] = int32_tensor({static_cast<int64_t>(cu.size())}, cu);
  }
  if (b.axes) {
    std::vector<int32_t> ids(tokens * b.axes);
    std::uniform_int_distribution<int32_t> id(0, 4095);
    for (int32_t& v : ids) v = id(rng);
    std::vector<int64_t> s = shape(0);
    s.back() = b.axes;  // [B, S, axes]
    s.erase(s.end() - 2);
    c.inputs["positions"] = int32_tensor(s, ids);
  }
  c.offset = decode && !b.axes ? 4096 : 0;
  c.backward = b.backward;
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class Timer {
 public:
  Timer(const CudaDriver& d, CUstream stream, Memory& scratch) : d_(d), stream_(stream) {
    d_.check(d_.cuEventCreate(&start_, 0), "cuEventCreate");
    d_.check(d_.cuEventCreate(&stop_, 0), "cuEventCreate");
    // Larger than any L2 (50 MB on H100, 60 MB on H200): written before
    // each timed call so the call's bytes come from device memory.
    flush_ = reinterpret_cast<CUdeviceptr>(scratch.allocate(kFlushBytes));
  }
  // Milliseconds of `enqueue`'s work on the stream, median of `reps`.
  template <typename F>
  double median_ms(int reps, F&& enqueue) {
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      d_.check(d_.cuMemsetD32Async(flush_, static_cast<unsigned>(i), kFlushBytes / 4, stream_), "cuMemsetD32Async");
      d_.check(d_.cuEventRecord(start_, stream_), "cuEventRecord");
      enqueue();
      d_.check(d_.cuEventRecord(stop_, stream_), "cuEventRecord");
      d_.check(d_.cuEventSynchronize(stop_), "cuEventSynchronize (a kernel's error surfaces here)");
      float t = 0;
      d_.check(d_.cuEventElapsedTime(&t, start_, stop_), "cuEventElapsedTime");
      ms.push_back(t);
    }
    return median(ms);
  }

 private:
  static constexpr size_t kFlushBytes = size_t{256} << 20;
  const CudaDriver& d_;
  CUstream stream_;
  CUevent start_ = nullptr, stop_ = nullptr;
  CUdeviceptr flush_ = 0;
};

// Microseconds per call, `n` calls back to back (host clock, then one
// synchronisation): what a decode step pays, launch overhead included.
template <typename F>
double us_per_call(Memory& m, int n, F&& call) {
  call();
  m.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) call();
  m.synchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / n;
}

}  // namespace

int run_bench(const std::string& dir, const CudaDriver& cuda, bool quick, const std::string& json_path) {
  std::unique_ptr<Memory> memory = cuda_memory(cuda), scratch = cuda_memory(cuda);
  Memory& m = *memory;  // each case's tensors, released after it
  const CUstream stream = static_cast<CUstream>(m.stream());
  Timer timer(cuda, stream, *scratch);
  const int reps = quick ? 5 : 50, calls = quick ? 20 : 2000;
  nlohmann::json rows = nlohmann::json::array();
  std::printf("\nBench on %s: rope-gen in place on device tensors vs a device-to-device copy of the same bytes\n"
              "(cuMemcpyDtoDAsync, same process and stream). GB/s counts bytes read + written (q and k once each way);\n"
              "ratio = copy time / kernel time. CUDA events, L2 flushed (256 MiB written) before every timed call; medians of %d.\n\n",
              cuda.description.c_str(), reps);
  std::printf("| case | tokens | kernel us | kernel GB/s | copy GB/s | ratio |\n|---|---|---|---|---|---|\n");
  struct Decode {
    std::string label;
    int64_t tokens;
    double stream_us, graph_us;
    std::string graph_error;
  };
  std::vector<Decode> decode;
  int failures = 0;
  for (const BenchCase& b : bench_cases()) {
    for (int64_t tokens : b.tokens) {
      try {
        const KitCase c = make_case(b, tokens);
        KitCall call(load_library(dir, b.lib), c, Form::InPlace, m);
        const size_t half = static_cast<size_t>(call.bytes_moved() / 2);
        const CUdeviceptr src = reinterpret_cast<CUdeviceptr>(m.allocate(half)), dst = reinterpret_cast<CUdeviceptr>(m.allocate(half));
        m.fill(reinterpret_cast<void*>(src), 0x3f, half);
        for (int i = 0; i < 3; ++i) call.run();  // the first loads the module
        m.synchronize();
        const double kernel_ms = timer.median_ms(reps, [&] { call.run(); });
        const double copy_ms = timer.median_ms(reps, [&] { cuda.check(cuda.cuMemcpyDtoDAsync_v2(dst, src, half, stream), "cuMemcpyDtoDAsync"); });
        const double bytes = static_cast<double>(call.bytes_moved());
        const double kernel_gbs = bytes / kernel_ms / 1e6, copy_gbs = bytes / copy_ms / 1e6;
        std::printf("| %s | %lld | %.1f | %.0f | %.0f | %.2f |\n", b.label, static_cast<long long>(tokens), kernel_ms * 1e3,
                    kernel_gbs, copy_gbs, copy_ms / kernel_ms);
        nlohmann::json row = {{"case", b.label}, {"tokens", tokens}, {"kernel_us", kernel_ms * 1e3}, {"kernel_gbs", kernel_gbs},
                              {"copy_gbs", copy_gbs}, {"ratio", copy_ms / kernel_ms}};
        if (tokens <= 64) {
          Decode d{b.label, tokens, us_per_call(m, calls, [&] { call.run(); }), 0, ""};
          try {
            CUgraph graph = nullptr;
            CUgraphExec exec = nullptr;
            cuda.check(cuda.cuStreamBeginCapture_v2(stream, ROPEGEN_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
            try {
              call.run();
            } catch (...) {
              cuda.cuStreamEndCapture(stream, &graph);
              throw;
            }
            cuda.check(cuda.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture (the call did something a graph cannot hold)");
            cuda.check(cuda.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
            d.graph_us = us_per_call(m, calls, [&] { cuda.check(cuda.cuGraphLaunch(exec, stream), "cuGraphLaunch"); });
          } catch (const std::exception& e) {
            d.graph_error = e.what();
          }
          row["us_per_call"] = d.stream_us;
          if (d.graph_error.empty()) row["us_per_graph_replay"] = d.graph_us;
          else row["graph_error"] = d.graph_error;
          decode.push_back(d);
        }
        rows.push_back(row);
      } catch (const std::exception& e) {
        ++failures;
        std::printf("| %s | %lld | FAILED: %s | | | |\n", b.label, static_cast<long long>(tokens), e.what());
      }
      m.release();
    }
  }
  std::printf("\nDecode: microseconds per call, %d calls back to back (host clock; launch and rope-gen's checks included)\n\n", calls);
  std::printf("| case | tokens | us per call | us per CUDA-graph replay |\n|---|---|---|---|\n");
  for (const Decode& d : decode) {
    char replay[32];
    std::snprintf(replay, sizeof replay, "%.2f", d.graph_us);
    std::printf("| %s | %lld | %.2f | %s |\n", d.label.c_str(), static_cast<long long>(d.tokens), d.stream_us,
                d.graph_error.empty() ? replay : ("capture failed: " + d.graph_error).c_str());
  }
  if (!json_path.empty()) std::ofstream(json_path) << rows.dump(1) << "\n";
  return failures ? 1 : 0;
}

}  // namespace kit
