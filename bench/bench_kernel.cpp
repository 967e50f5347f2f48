#include "bench_kernel.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ropegen/rope_math.h"
#include "ropegen/runtime.h"
#include "runtime/device_probe.h"
#include "runtime/host_memory.h"
#include "runtime/host_tensor.h"
#include "call/contract.h"
#include "call/layout_traits.h"
#include "targets/target_names.h"

namespace ropegen::bench {
namespace {

using Clock = std::chrono::steady_clock;

// B sequences of S tokens in a layout (packed: B * S tokens).
std::vector<int64_t> layout_shape(Layout layout, int64_t b, int64_t s, int64_t h, int64_t d) {
  const call::LayoutTraits& t = call::layout_traits(layout);
  std::vector<int64_t> shape(t.rank);
  shape[t.d] = d, shape[t.s] = t.packed() ? b * s : s;
  if (t.h >= 0) shape[t.h] = h;
  if (!t.packed()) shape[t.b] = b;
  return shape;
}

// The tensor the kernel reads (q, x or the scores) in its layout.
std::vector<int64_t> tensor_shape(const RopeSpec& spec, const BenchOptions& o, int64_t heads) {
  switch (spec.encoding) {
    case Encoding::Rope: return layout_shape(spec.layout, o.batch, o.seq, heads, spec.head_dim);
    case Encoding::Sinusoidal:
    case Encoding::Learned: return layout_shape(spec.layout, o.batch, o.seq, 1, spec.dim);
    case Encoding::Alibi: return {o.batch, spec.num_heads, o.seq, o.keys};
  }
  return {};
}

// Median seconds of `fn` over repeated runs after a warm-up.
double median_seconds(const std::function<void()>& fn, double min_seconds, int* runs) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 10 || (std::chrono::duration<double>(Clock::now() - start).count() < min_seconds && times.size() < 10000)) {
    const auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  *runs = static_cast<int>(times.size());
  return times[times.size() / 2];
}

// The yardstick: one thread copies with memcpy; several threads copy with a
// parallel Halide pipeline on the same thread pool as the kernel.
std::function<void()> make_copy(void* dst, const void* src, int64_t bytes, int threads, const Halide::Target& target) {
  if (threads == 1) return [=] { std::memcpy(dst, src, bytes); };
  const int64_t words = bytes / 4;
  auto in = std::make_shared<Halide::Buffer<uint32_t>>(static_cast<uint32_t*>(const_cast<void*>(src)), static_cast<int>(words));
  auto out = std::make_shared<Halide::Buffer<uint32_t>>(static_cast<uint32_t*>(dst), static_cast<int>(words));
  Halide::ImageParam input(Halide::UInt(32), 1, "copy_in");
  Halide::Func copy("copy");
  Halide::Var x("x"), xo("xo"), xi("xi");
  copy(x) = input(x);
  copy.split(x, xo, xi, 1 << 16, Halide::TailStrategy::GuardWithIf).parallel(xo).vectorize(xi, target.natural_vector_size<uint32_t>());
  auto pipeline = std::make_shared<Halide::Pipeline>(copy);
  pipeline->compile_jit(target);
  return [=]() mutable {
    input.set(*in);
    pipeline->realize(*out, target);
  };
}

}  // namespace

Result<BenchResult> bench_rope(const RopeSpec& spec, const BenchOptions& o) {
  // GPU targets: the driver and a device must be there (a diagnostic, not Halide's abort).
  Result<Halide::Target> target = runtime::runnable_target(o.target);
  if (!target) return target.errors();
  if (o.threads > 0) setenv("HL_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());

  KernelVariant variant;
  variant.with_k = o.k_heads > 0;
  variant.backward = o.backward;
  const bool rope = spec.encoding == Encoding::Rope;
  if (!rope && (variant.with_k || o.backward))
    return Diagnostic{{"--k-heads", -1, -1}, "k and backward kernels are for rope specs", {}};
  if (rope && spec.frequency.scheme == FrequencyScheme::Runtime && o.backward)
    return Diagnostic{{"--backward", -1, -1}, "bench times the backward of static frequencies only", {}};
  const Layout layout = call::tensor_layout(call::call_contract(spec));
  const std::vector<int64_t> q_shape = tensor_shape(spec, o, o.heads);
  const std::vector<int64_t> k_shape = tensor_shape(spec, o, o.k_heads);
  const int axes = std::max(1, spec.axes.count());
  const int64_t elem_bytes = spec.dtype == DType::F32 ? 4 : 2;
  // Sizes checked before anything is allocated: float32 values, the spec's
  // dtype in and out, the ids, a learned table.
  struct Buffer {
    const char* name;
    std::vector<int64_t> dims;
    int64_t item_bytes;
  };
  const int64_t tensor_bytes = 4 + 2 * elem_bytes;
  const std::vector<Buffer> buffers = {
      {"q", q_shape, tensor_bytes},
      {"k", variant.with_k ? k_shape : std::vector<int64_t>{0}, tensor_bytes},
      {"position ids", {o.batch, o.seq, axes}, 4},
      {"table", {spec.encoding == Encoding::Learned ? o.seq : 0, spec.dim}, 4 + elem_bytes}};
  std::vector<std::pair<int64_t, int64_t>> parts;
  for (const Buffer& b : buffers) {
    Result<int64_t> count = runtime::element_count(b.dims, fmt::format("the benchmark's {}", b.name));
    if (!count) return count.errors();
    parts.emplace_back(*count, b.item_bytes);
  }
  // Buffer dims, and the packed token count (thd / td), are int32 for Halide.
  if (o.batch * o.seq > INT32_MAX || std::any_of(q_shape.begin(), q_shape.end(), [](int64_t d) { return d > INT32_MAX; }))
    return Diagnostic{{"--shape", -1, -1}, "every dim, and batch x tokens, must be at most 2^31 - 1", {}};
  Result<uint64_t> bytes = runtime::host_bytes_for(parts, fmt::format("a benchmark with q shaped ({})", fmt::join(q_shape, ", ")));
  if (!bytes) return bytes.errors();
  const int64_t q_elems = parts[0].first, k_elems = parts[1].first;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> values(q_elems + k_elems);
  for (float& v : values) v = dist(rng);
  // q and k live in one allocation so the copy moves exactly the same bytes.
  runtime::HostStorage in = runtime::to_storage(values, spec.dtype), out = in.empty_like();
  const ElementType type = in.element_type();
  auto tensor = [&](void* data, const std::vector<int64_t>& shape) {
    return Tensor::dense(data, type, shape.data(), static_cast<int>(shape.size()));
  };

  Call call;
  call.q = tensor(in.data(), q_shape);
  call.out_q = tensor(out.data(), q_shape);
  if (variant.with_k) {
    call.k = tensor(static_cast<char*>(in.data()) + q_elems * elem_bytes, k_shape);
    call.out_k = tensor(static_cast<char*>(out.data()) + q_elems * elem_bytes, k_shape);
  }
  // Explicit ids 0 .. S-1 per sequence (multi-axis: the same on every axis).
  std::vector<int32_t> ids(o.batch * o.seq * axes);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i / axes % o.seq);
  if (spec.positions == PositionsMode::Explicit && spec.encoding != Encoding::Alibi) {
    std::vector<int64_t> id_shape = call::layout_traits(layout).token_dims(q_shape.data());
    if (spec.axes.enabled()) id_shape.push_back(axes);
    call.positions = Tensor::dense(ids.data(), ElementType::Int32, id_shape.data(), static_cast<int>(id_shape.size()));
  }
  // learned: a table row per position; run-time frequencies: the lang ones (rope_math's).
  std::vector<float> table_values(spec.encoding == Encoding::Learned ? o.seq * spec.dim : 0, 0.5f);
  runtime::HostStorage table = runtime::to_storage(table_values, spec.dtype);
  if (spec.encoding == Encoding::Learned) call.table = Tensor::dense(table.data(), type, {o.seq, spec.dim});
  std::vector<float> freqs;
  if (rope && spec.frequency.scheme == FrequencyScheme::Runtime) {
    RopeSpec lang = spec;
    lang.frequency = Frequency{};
    for (double f : compute_frequencies(lang).inv_freq) freqs.push_back(static_cast<float>(f));
    call.freqs = Tensor::dense(freqs.data(), ElementType::Float32, {static_cast<int64_t>(freqs.size())});
  }
  // Packed layouts: B sequences of S tokens.
  std::vector<int32_t> cu;
  for (int64_t b = 0; b <= o.batch; ++b) cu.push_back(static_cast<int32_t>(b * o.seq));
  if (call::layout_traits(layout).packed())
    call.cu_seqlens = Tensor::dense(cu.data(), ElementType::Int32, {static_cast<int64_t>(cu.size())});
  call.seq_len = o.seq;
  call.backward = o.backward;
  Result<std::shared_ptr<Kernel>> acquired = Runtime::process().get(spec, variant, o.target);
  if (!acquired) return acquired.errors();
  Kernel& kernel = *acquired.value();
  if (Status first = kernel.run(call); !first) return first.errors();  // checks the call once, loudly

  BenchResult r;
  r.bytes = 2 * (q_elems + k_elems) * elem_bytes;
  int copy_runs = 0;
  auto copy = make_copy(out.data(), in.data(), r.bytes / 2, threads, *target);
  // Interleave the two measurements' warm-ups so both see a warm machine.
  const double copy_s = median_seconds(copy, o.min_seconds, &copy_runs);
  // On a GPU target each run includes staging and host <-> device copies (runtime/device_call.h).
  Status ran;
  const double kernel_s = median_seconds([&] { if (ran) ran = kernel.run(call); }, o.min_seconds, &r.runs);
  if (!ran) return ran.errors();
  r.kernel_us = kernel_s * 1e6;
  r.copy_us = copy_s * 1e6;
  r.gbps = r.bytes / kernel_s / 1e9;
  r.copy_gbps = r.bytes / copy_s / 1e9;
  r.ratio = r.gbps / r.copy_gbps;
  return r;
}

}  // namespace ropegen::bench
