#include "bench_kernel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include "abi/kernel_abi.h"
#include "call/contract.h"
#include "call/prepare_call.h"
#include "ropegen/rope_math.h"
#include "ropegen/rope_table.h"
#include "ropegen/runtime.h"
#include "runtime/device_probe.h"
#include "runtime/host_memory.h"
#include "runtime/host_tensor.h"
#include "table_kernel.h"
#include "targets/target_names.h"
#include "worker_pool.h"

namespace ropegen::bench {
namespace {

using Clock = std::chrono::steady_clock;

// B sequences of S tokens in a layout (packed: B * S tokens).
std::vector<int64_t> layout_shape(Layout layout, int64_t b, int64_t s, int64_t h, int64_t d) {
  const abi::LayoutTraits& t = abi::layout_traits(layout);
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

// One side of the comparison: what a run does, and the seconds each timed run took.
struct Side {
  std::function<void()> run;
  std::vector<double> seconds;
  int reps = 1;  // runs per batch

  double median() {
    std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
    return seconds[seconds.size() / 2];
  }
};

double time_one(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// `passes` passes; in each, every side runs one untimed warm-up and a batch
// of timed runs (about min_seconds / passes), the sides in turn and the
// first side rotating from pass to pass.
void measure_interleaved(std::vector<Side*> sides, int passes, double min_seconds) {
  for (Side* side : sides) {
    double estimate = 1e9;
    for (int i = 0; i < 3; ++i) estimate = std::min(estimate, time_one(side->run));
    side->reps = static_cast<int>(std::clamp(min_seconds / passes / std::max(estimate, 1e-9), 1.0, 20000.0));
  }
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t j = 0; j < sides.size(); ++j) {
      Side& side = *sides[(pass + j) % sides.size()];
      side.run();
      for (int i = 0; i < side.reps; ++i) side.seconds.push_back(time_one(side.run));
    }
  }
}

// Halide's pool size: HL_NUM_THREADS, else one thread per core (as Halide's runtime).
Result<int> halide_threads() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* env = std::getenv("HL_NUM_THREADS");
  if (!env || !*env) return cores;
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  if (*end != '\0' || n < 1 || n > 1024)
    return named_error("HL_NUM_THREADS", fmt::format("HL_NUM_THREADS={} is not a thread count in 1..1024", env));
  return static_cast<int>(n);
}

}  // namespace

Result<BenchResult> bench_rope(const RopeSpec& spec, const BenchOptions& o) {
  // GPU targets: the driver and a device must be there (a diagnostic, not Halide's abort).
  Result<Halide::Target> target = runtime::runnable_target(o.target);
  if (!target) return target.errors();
  Result<int> pool_threads = halide_threads();
  if (!pool_threads) return pool_threads.errors();
  const int threads = o.threads > 0 ? o.threads : *pool_threads;
  if (threads != *pool_threads)
    return named_error("threads",
                       fmt::format("threads is {} but Halide's pool has {} (HL_NUM_THREADS): set HL_NUM_THREADS={} "
                                   "before the first kernel runs, so the copy and the kernel use the same threads",
                                   threads, *pool_threads, threads));

  KernelVariant variant;
  variant.with_k = o.k_heads > 0;
  variant.backward = o.backward;
  const bool rope = spec.encoding == Encoding::Rope;
  if (!rope && (variant.with_k || o.backward))
    return named_error("--k-heads", "k and backward kernels are for rope specs");
  if (rope && spec.frequency.scheme == FrequencyScheme::Runtime && o.backward)
    return named_error("--backward", "bench times the backward of static frequencies only");
  const bool random = o.positions == BenchPositions::Random;
  if (random && (spec.positions != PositionsMode::Explicit || spec.encoding == Encoding::Alibi))
    return named_error("--positions", "random positions need a spec with `positions: explicit`");
  if (o.table_kernel && (!rope || o.backward))
    return named_error("--table-kernel", "the table kernel is a rope forward kernel");
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
  // Frequency scheme table: a float32 cos/sin cache with a row for every position used.
  const bool cos_sin_cache = rope && spec.frequency.scheme == FrequencyScheme::Table;
  const int64_t cache_rows = cos_sin_cache ? (random ? kRandomPositions : o.seq) : 0;
  const std::vector<Buffer> buffers = {
      {"q", q_shape, tensor_bytes},
      {"k", variant.with_k ? k_shape : std::vector<int64_t>{0}, tensor_bytes},
      {"position ids", {o.batch, o.seq, axes}, 4},
      {"table", {spec.encoding == Encoding::Learned ? o.seq : 0, spec.dim}, 4 + elem_bytes},
      {"cos/sin cache", {cache_rows, spec.rotary_dim}, 4}};
  std::vector<std::pair<int64_t, int64_t>> parts;
  for (const Buffer& b : buffers) {
    Result<int64_t> count = runtime::element_count(b.dims, fmt::format("the benchmark's {}", b.name));
    if (!count) return count.errors();
    parts.emplace_back(*count, b.item_bytes);
  }
  // Buffer dims, and the packed token count (thd / td), are int32 for Halide.
  if (o.batch * o.seq > INT32_MAX || std::any_of(q_shape.begin(), q_shape.end(), [](int64_t d) { return d > INT32_MAX; }))
    return named_error("--shape", "every dim, and batch x tokens, must be at most 2^31 - 1");
  Result<uint64_t> bytes = runtime::host_bytes_for(parts, fmt::format("a benchmark with q shaped ({})", fmt::join(q_shape, ", ")));
  if (!bytes) return bytes.errors();
  const int64_t q_elems = parts[0].first, k_elems = parts[1].first;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> values(q_elems + k_elems);
  for (float& v : values) v = dist(rng);
  // q and k live in one allocation so the copy moves exactly the same bytes.
  runtime::HostStorage in = runtime::to_storage(values, spec.dtype), out = in.empty_like();
  values = {};
  const ElementType type = in.element_type();
  auto tensor = [&](void* data, const std::vector<int64_t>& shape) {
    return Tensor::dense(data, type, shape.data(), static_cast<int>(shape.size()));
  };

  // output_dtype fp8: the outputs are uint8 codes (in `out`, which is larger than they need).
  const bool codes = spec.has_fp8_output();
  const int64_t out_bytes = codes ? 1 : elem_bytes;
  auto out_tensor = [&](void* data, const std::vector<int64_t>& shape) {
    return Tensor::dense(data, codes ? ElementType::UInt8 : type, shape.data(), static_cast<int>(shape.size()));
  };

  Call call;
  // In place: the kernels write where they read (out stays the copy's destination).
  void* const result = o.in_place ? in.data() : out.data();
  call.q = tensor(in.data(), q_shape);
  if (!o.in_place) call.out_q = out_tensor(result, q_shape);
  if (variant.with_k) {
    call.k = tensor(static_cast<char*>(in.data()) + q_elems * elem_bytes, k_shape);
    if (!o.in_place) call.out_k = out_tensor(static_cast<char*>(result) + q_elems * out_bytes, k_shape);
  }
  // Explicit ids 0 .. S-1 per sequence, or uniform in [0, 8192) (multi-axis:
  // the same on every axis).
  std::vector<int32_t> ids(o.batch * o.seq * axes);
  std::mt19937 id_rng(11);
  std::uniform_int_distribution<int32_t> random_id(0, kRandomPositions - 1);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = random ? (i % axes == 0 ? random_id(id_rng) : ids[i - 1]) : static_cast<int32_t>(i / axes % o.seq);
  if (spec.positions == PositionsMode::Explicit && spec.encoding != Encoding::Alibi) {
    call::Shape id_shape = call::token_dims(abi::layout_traits(layout), q_shape.data());
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
  // cos_sin_cache: the lang frequencies' table (rope_table), as an engine keeps it
  // (one row per position; multi-axis pairs read the row of their axis's id).
  std::vector<float> cache;
  if (cos_sin_cache) {
    RopeSpec lang = spec;
    lang.frequency = Frequency{};
    lang.axes = Axes{};
    std::vector<int64_t> rows(cache_rows);
    for (int64_t p = 0; p < cache_rows; ++p) rows[p] = p;
    Result<RopeTable> made = rope_table(lang, rows);
    if (!made) return made.errors();
    cache = std::move(made->values);
    call.cos_sin_cache = Tensor::dense(cache.data(), ElementType::Float32, {cache_rows, spec.rotary_dim});
  }
  // qk_norm's weights (per_head): ones, q's and k's.
  runtime::HostStorage norm_weight = runtime::to_storage(std::vector<float>(rope ? spec.head_dim : 0, 1.0f), spec.dtype);
  if (spec.qk_norm.has_weight()) {
    call.q_norm_weight = Tensor::dense(norm_weight.data(), type, {spec.head_dim});
    if (variant.with_k) call.k_norm_weight = call.q_norm_weight;
  }
  // Packed layouts: B sequences of S tokens.
  std::vector<int32_t> cu;
  for (int64_t b = 0; b <= o.batch; ++b) cu.push_back(static_cast<int32_t>(b * o.seq));
  if (abi::layout_traits(layout).packed())
    call.cu_seqlens = Tensor::dense(cu.data(), ElementType::Int32, {static_cast<int64_t>(cu.size())});
  // Random ids: the sequence length is HF's, max id + 1.
  if (!random) call.seq_len = o.seq;
  call.backward = o.backward;
  Result<std::shared_ptr<Kernel>> acquired = Runtime::process().get(spec, variant, o.target);
  if (!acquired) return acquired.errors();
  Kernel& kernel = *acquired.value();
  if (Status first = kernel.run(call); !first) return first.errors();  // checks the call once, loudly

  BenchResult r;
  r.bytes = 2 * (q_elems + k_elems) * elem_bytes;
  r.threads = threads;
  WorkerPool pool(threads);
  // On a GPU target each run includes staging and host <-> device copies (runtime/device_call.h).
  Status ran;
  Side kernel_side{[&] { if (ran) ran = kernel.run(call); }, {}};
  Side copy_side{[&] { parallel_copy(pool, out.data(), in.data(), r.bytes / 2); }, {}};
  std::vector<Side*> sides = {&kernel_side, &copy_side};

  // The hand-written table kernel: its table is built here, not timed.
  std::optional<TableKernel> table_kernel;
  TableTokens tokens;
  Side table_side;
  if (o.table_kernel) {
    Result<TableKernel> made = TableKernel::make(spec, std::max(kRandomPositions, o.seq));
    if (!made) return made.errors();
    table_kernel.emplace(std::move(*made));
    r.table_avx512 = table_kernel->avx512();
    tokens.q = in.data(), tokens.out_q = result, tokens.q_heads = o.heads;
    tokens.k = static_cast<char*>(in.data()) + q_elems * elem_bytes;
    tokens.out_k = static_cast<char*>(result) + q_elems * elem_bytes;
    tokens.k_heads = o.k_heads;
    tokens.positions = ids.data(), tokens.tokens = o.batch * o.seq;
    table_side.run = [&] {
      pool.run([&](int i) {
        const int64_t n = tokens.tokens, parts = pool.threads();
        table_kernel->run(tokens, n * i / parts, n * (i + 1) / parts);
      });
    };
    sides.push_back(&table_side);
  }
  measure_interleaved(sides, o.passes, o.min_seconds);
  if (!ran) return ran.errors();
  const double kernel_s = kernel_side.median(), copy_s = copy_side.median();
  r.runs = static_cast<int>(kernel_side.seconds.size());
  r.copy_runs = static_cast<int>(copy_side.seconds.size());
  r.kernel_us = kernel_s * 1e6;
  r.copy_us = copy_s * 1e6;
  r.gbps = r.bytes / kernel_s / 1e9;
  r.copy_gbps = r.bytes / copy_s / 1e9;
  r.ratio = r.gbps / r.copy_gbps;
  if (table_kernel) {
    const double table_s = table_side.median();
    r.table = SideResult{table_s * 1e6, r.bytes / table_s / 1e9, copy_s / table_s, static_cast<int>(table_side.seconds.size())};
  }
  return r;
}

}  // namespace ropegen::bench
