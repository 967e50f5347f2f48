// The CPU kernels size their parallel tasks by the thread pool of the
// runtime that runs them (pool_threads, targets/cpu_schedule.cpp): every
// pool size gives the same bits, tails and all, through the JIT and through
// kernels loaded from the disk cache, which export their pool's size.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

#include <dlfcn.h>

#include <fmt/format.h>

#include "call/prepare_call.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/host_tensor.h"
#include "runtime/jit_kernel.h"
#include "runtime/jit_runtime.h"
#include "support/run_command.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
using runtime::HostStorage;

// llama3-8B-like rows (64 pairs: 8-token tiles at the least), explicit ids.
const char* kSpec = "name: pool\nhead_dim: 128\ndtype: bf16\npositions: explicit\n";

struct Shape {
  int64_t batch, seq;
  bool in_place;
};

size_t bytes(const HostStorage& s) { return s.elements() * element_bytes(s.element_type()); }

// q (5 heads) and k (2) from a fixed seed, rotated by `run`; both outputs'
// bytes. Explicit ids: random, or offset + s for every sequence with
// `offset`; implicit positions start at `offset`.
template <typename Run>
std::string rotate(const RopeSpec& spec, const Shape& s, Run run, std::optional<int64_t> offset = std::nullopt) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  auto storage = [&](int64_t heads) {
    std::vector<float> v(s.batch * s.seq * heads * spec.head_dim);
    for (float& x : v) x = dist(rng);
    return runtime::to_storage(v, spec.dtype);
  };
  HostStorage q = storage(5), k = storage(2), out_q = q.empty_like(), out_k = k.empty_like();
  std::memset(out_q.data(), 0x5a, bytes(out_q)), std::memset(out_k.data(), 0x5a, bytes(out_k));
  std::vector<int32_t> ids(s.batch * s.seq);
  std::uniform_int_distribution<int32_t> id(0, 8191);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = offset ? static_cast<int32_t>(*offset + i % s.seq) : id(rng);
  const std::vector<int64_t> q_shape = {s.batch, s.seq, 5, spec.head_dim}, k_shape = {s.batch, s.seq, 2, spec.head_dim};
  Call call;
  call.q = Tensor::dense(q.data(), q.element_type(), q_shape.data(), 4);
  call.k = Tensor::dense(k.data(), k.element_type(), k_shape.data(), 4);
  HostStorage& oq = s.in_place ? q : out_q;
  HostStorage& ok = s.in_place ? k : out_k;
  call.out_q = Tensor::dense(oq.data(), oq.element_type(), q_shape.data(), 4);
  call.out_k = Tensor::dense(ok.data(), ok.element_type(), k_shape.data(), 4);
  if (spec.positions == PositionsMode::Explicit) call.positions = Tensor::dense(ids.data(), ElementType::Int32, {s.batch, s.seq});
  else call.offset = offset.value_or(0);
  run(call);
  return std::string(static_cast<const char*>(oq.data()), bytes(oq)) +
         std::string(static_cast<const char*>(ok.data()), bytes(ok));
}

// The call prepared for `spec` (it must be valid) and run on `kernel`.
void prepare_and_run(const RopeSpec& spec, runtime::JitKernel& kernel, Call& call) {
  Result<call::PreparedCall> prepared = call::prepare_call(spec, call);
  ASSERT_TRUE(prepared.ok()) << format(prepared.errors());
  kernel.run(*prepared);
}

// Decode (one token per sequence, 67 of them) and a short prefill, so that
// tasks of every size below leave tails.
const Shape kShapes[] = {{67, 1, false}, {67, 1, true}, {3, 70, false}, {3, 70, true}};

TEST(PoolThreads, EveryPoolSizeGivesTheSameBitsThroughTheJit) {
  const RopeSpec spec = parse_spec(kSpec, "pool.yaml").value();
  lowering::KernelVariant variant;
  variant.with_k = true;
  const Halide::Target host = Halide::get_host_target();
  runtime::JitKernel jit(spec, variant, host);
  auto set_threads = reinterpret_cast<int (*)(int)>(runtime::jit_runtime_export(host, "halide_set_num_threads"));
  auto get_threads = reinterpret_cast<int (*)()>(runtime::jit_runtime_export(host, "halide_get_num_threads"));
  ASSERT_NE(set_threads, nullptr);
  ASSERT_NE(get_threads, nullptr);
  auto run = [&](Call& call) { prepare_and_run(spec, jit, call); };
  const int before = set_threads(1);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(fmt::format("[{}, {}] in_place={}", s.batch, s.seq, s.in_place));
    set_threads(1);
    const std::string serial = rotate(spec, s, run);
    for (int threads : {2, 3, 5, 8, 64}) {
      SCOPED_TRACE(threads);
      set_threads(threads);
      ASSERT_EQ(get_threads(), threads);
      EXPECT_EQ(rotate(spec, s, run), serial);
    }
  }
  set_threads(before);
}

// Implicit positions: every sequence of a call has the same cos/sin, which
// a tile of several sequences computes once (lowering's
// cos_sin_shared_by_batch; how many sequences a tile takes depends on the
// pool's size): the same bits as explicit ids offset + s, at every pool
// size, with tails of tiles and of sequence groups.
TEST(PoolThreads, ImplicitPositionsSharedByTheBatchGiveTheIdsBitsAtEveryPoolSize) {
  const RopeSpec ids_spec = parse_spec(kSpec, "pool.yaml").value();
  RopeSpec implicit = ids_spec;
  implicit.positions = PositionsMode::Implicit;
  lowering::KernelVariant variant;
  variant.with_k = true;
  const Halide::Target host = Halide::get_host_target();
  runtime::JitKernel with_ids(ids_spec, variant, host), without(implicit, variant, host);
  auto set_threads = reinterpret_cast<int (*)(int)>(runtime::jit_runtime_export(host, "halide_set_num_threads"));
  ASSERT_NE(set_threads, nullptr);
  auto runner = [](const RopeSpec& spec, runtime::JitKernel& kernel) {
    return [&spec, &kernel](Call& call) { prepare_and_run(spec, kernel, call); };
  };
  const int before = set_threads(1);
  for (const Shape& s : {Shape{67, 1, false}, Shape{3, 70, true}, Shape{5, 300, false}, Shape{2, 1000, true}}) {
    SCOPED_TRACE(fmt::format("[{}, {}] in_place={}", s.batch, s.seq, s.in_place));
    const std::string expected = rotate(ids_spec, s, runner(ids_spec, with_ids), int64_t{4093});
    for (int threads : {1, 2, 3, 5, 8, 64}) {
      SCOPED_TRACE(threads);
      set_threads(threads);
      EXPECT_EQ(rotate(implicit, s, runner(implicit, without), int64_t{4093}), expected);
    }
  }
  set_threads(before);
}

// Learned PE with implicit positions shares each table row by the batch
// when the sequence has a tile per thread, else tiles the batch too (a
// specialization on pool_threads): both give x + table[offset + s].
TEST(PoolThreads, LearnedEncodingIsRightOnEitherSideOfTheSharedRowsSwitch) {
  const RopeSpec spec = parse_spec("name: wpe\nencoding: learned\ndim: 37\npositions: implicit\n", "wpe.yaml").value();
  const Halide::Target host = Halide::get_host_target();
  runtime::JitKernel jit(spec, lowering::KernelVariant{}, host);
  auto set_threads = reinterpret_cast<int (*)(int)>(runtime::jit_runtime_export(host, "halide_set_num_threads"));
  ASSERT_NE(set_threads, nullptr);
  const int64_t rows = 90, offset = 9, dim = spec.dim;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> table(rows * dim);
  for (float& v : table) v = dist(rng);
  const int before = set_threads(1);
  // 70 tokens are 5 tiles of 16: shared at 1..5 threads, not at 8 or 64.
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{3, 70}, {67, 1}})
    for (int threads : {1, 2, 5, 8, 64}) {
      SCOPED_TRACE(fmt::format("[{}, {}], {} threads", batch, seq, threads));
      set_threads(threads);
      std::vector<float> x(batch * seq * dim), out(x.size(), -1.0f);
      for (float& v : x) v = dist(rng);
      Call call;
      call.q = Tensor::dense(x.data(), ElementType::Float32, {batch, seq, dim});
      call.out_q = Tensor::dense(out.data(), ElementType::Float32, {batch, seq, dim});
      call.table = Tensor::dense(table.data(), ElementType::Float32, {rows, dim});
      call.offset = offset;
      prepare_and_run(spec, jit, call);
      int wrong = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < seq; ++t)
          for (int64_t d = 0; d < dim; ++d) {
            const int64_t i = (b * seq + t) * dim + d;
            wrong += out[i] != x[i] + table[(offset + t) * dim + d];
          }
      EXPECT_EQ(wrong, 0);
    }
  set_threads(before);
}

TEST(PoolThreads, CachedKernelsExportTheirPoolSize) {
  const std::string dir = test::make_temp_dir();
  const RopeSpec spec = parse_spec(kSpec, "pool.yaml").value();
  lowering::KernelVariant variant;
  variant.with_k = true;
  {
    Runtime r(RuntimeOptions{dir + "/cache", uint64_t{1} << 30});
    Result<std::shared_ptr<Kernel>> kernel = r.get(spec, variant);
    ASSERT_TRUE(kernel.ok()) << format(kernel.errors());
    const std::string from_runtime =
        rotate(spec, kShapes[0], [&](Call& call) { ASSERT_TRUE((*kernel)->run(call).ok()); });
    // The kernel holds its object open: dlopen finds the same one, whose pool ran the call.
    int objects = 0;
    for (const auto& f : fs::directory_iterator(dir + "/cache/kernels")) {
      if (f.path().extension() != ".so") continue;
      ++objects;
      void* so = dlopen(f.path().c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
      ASSERT_NE(so, nullptr) << f.path() << " is not the object the kernel runs";
      auto get_threads = reinterpret_cast<int (*)()>(dlsym(so, "halide_get_num_threads"));
      ASSERT_NE(get_threads, nullptr) << f.path();
      EXPECT_GE(get_threads(), 1);
      dlclose(so);
    }
    EXPECT_EQ(objects, 1);
    // The same bits as the JIT kernel at any pool size (the test above).
    runtime::JitKernel jit(spec, variant, Halide::get_host_target());
    EXPECT_EQ(rotate(spec, kShapes[0], [&](Call& call) { jit.run(call::prepare_call(spec, call).value()); }), from_runtime);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ropegen
