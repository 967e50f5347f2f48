// ropegen::Runtime in one process: the memory and disk levels, kernels
// loaded from disk against the JIT kernel (bit for bit), threads asking for
// one kernel, damaged entries, the size cap, and the fallback when the
// cache cannot be used. Every test has its own cache directory.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "call/prepare_call.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_key.h"
#include "runtime/cache_stats.h"
#include "runtime/device_probe.h"
#include "runtime/disk_cache.h"
#include "runtime/host_tensor.h"
#include "runtime/jit_kernel.h"
#include "support/run_command.h"

namespace ropegen {
namespace {

namespace fs = std::filesystem;
using runtime::HostStorage;

RopeSpec spec_from(const std::string& text) {
  Result<RopeSpec> s = parse_spec(text, "test");
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : format(s.errors()));
  return s.value();
}

const char* kFull = "name: full\nhead_dim: 16\n";
// Dims before and after the rotary part pass through; bf16, explicit int64 ids, interleaved.
const char* kPartial =
    "name: partial\nhead_dim: 24\nrotary_dim: 8\nrotary_offset: 8\npairing: interleaved\ndtype: bf16\n"
    "positions: explicit\n";
const char* kPackedYarn =
    "name: packed\nhead_dim: 32\nlayout: thd\ndtype: f16\n"
    "scaling:\n  type: yarn\n  factor: 4\n  original_max_position: 64\n";

lowering::KernelVariant variant(bool with_k, int position_bits = 32) {
  lowering::KernelVariant v;
  v.with_k = with_k;
  v.position_type = position_bits == 64 ? IdType::Int64 : IdType::Int32;
  return v;
}

// One call's tensors (random, from a fixed seed) and the Call viewing them.
struct CallData {
  std::vector<int64_t> q_shape, k_shape;
  std::unique_ptr<HostStorage> q, out_q, k, out_k;
  std::vector<int32_t> pos32, cu;
  std::vector<int64_t> pos64;
  Call call;

  // Both outputs' bytes, for exact comparison.
  std::string outputs() const {
    std::string bytes(static_cast<const char*>(out_q->data()), out_q->elements() * element_bytes(out_q->element_type()));
    if (out_k) bytes.append(static_cast<const char*>(out_k->data()), out_k->elements() * element_bytes(out_k->element_type()));
    return bytes;
  }
};

std::unique_ptr<HostStorage> random_storage(DType dtype, const std::vector<int64_t>& shape, std::mt19937& rng) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return std::make_unique<HostStorage>(runtime::to_storage(values, dtype));
}

// An output buffer full of a canary pattern, so dims a kernel fails to write show.
std::unique_ptr<HostStorage> canary_like(const HostStorage& s) {
  auto out = std::make_unique<HostStorage>(s.empty_like());
  std::memset(out->data(), 0x5a, out->elements() * element_bytes(out->element_type()));
  return out;
}

std::unique_ptr<CallData> make_call(const RopeSpec& spec, const lowering::KernelVariant& v, bool in_place = false) {
  auto c = std::make_unique<CallData>();
  std::mt19937 rng(42);
  const bool thd = spec.layout == Layout::THD;
  c->q_shape = thd ? std::vector<int64_t>{10, 3, spec.head_dim} : std::vector<int64_t>{2, 5, 3, spec.head_dim};
  c->k_shape = c->q_shape;
  c->k_shape[thd ? 1 : 2] = 1;
  auto view = [&](HostStorage& s, const std::vector<int64_t>& shape) {
    return Tensor::dense(s.data(), s.element_type(), shape.data(), static_cast<int>(shape.size()));
  };
  c->q = random_storage(spec.dtype, c->q_shape, rng);
  c->out_q = canary_like(*c->q);
  c->call.q = view(*c->q, c->q_shape);
  c->call.out_q = view(in_place ? *c->q : *c->out_q, c->q_shape);
  if (v.with_k) {
    c->k = random_storage(spec.dtype, c->k_shape, rng);
    c->out_k = canary_like(*c->k);
    c->call.k = view(*c->k, c->k_shape);
    c->call.out_k = view(in_place ? *c->k : *c->out_k, c->k_shape);
  }
  if (spec.positions == PositionsMode::Explicit) {
    std::uniform_int_distribution<int64_t> ids(0, 5000);
    for (int i = 0; i < 10; ++i) c->pos64.push_back(ids(rng));
    c->pos32.assign(c->pos64.begin(), c->pos64.end());
    const bool wide = v.position_type == IdType::Int64;
    void* data = wide ? static_cast<void*>(c->pos64.data()) : c->pos32.data();
    c->call.positions = Tensor::dense(data, wide ? ElementType::Int64 : ElementType::Int32, {2, 5});
    c->call.seq_len = 5001;
  } else {
    c->call.seq_len = thd ? 6 : 5;
  }
  if (thd) {
    c->cu = {0, 4, 10};
    c->call.cu_seqlens = Tensor::dense(c->cu.data(), ElementType::Int32, {3});
  }
  if (in_place) {  // the result is in the inputs
    c->out_q = std::move(c->q);
    if (v.with_k) c->out_k = std::move(c->k);
  }
  return c;
}

std::string run_kernel(Kernel& kernel, const RopeSpec& spec, const lowering::KernelVariant& v, bool in_place = false) {
  std::unique_ptr<CallData> c = make_call(spec, v, in_place);
  const Status ran = kernel.run(c->call);
  EXPECT_TRUE(ran.ok()) << (ran.ok() ? "" : format(ran.errors()));
  return c->outputs();
}

std::string run_jit(const RopeSpec& spec, const lowering::KernelVariant& v, bool in_place = false) {
  runtime::JitKernel jit(spec, v, Halide::get_host_target());
  std::unique_ptr<CallData> c = make_call(spec, v, in_place);
  Result<call::PreparedCall> prepared = call::prepare_call(spec, c->call);
  EXPECT_TRUE(prepared.ok()) << (prepared.ok() ? "" : format(prepared.errors()));
  if (prepared) jit.run(*prepared);
  return c->outputs();
}

std::shared_ptr<Kernel> get(Runtime& r, const RopeSpec& spec, const lowering::KernelVariant& v) {
  Result<std::shared_ptr<Kernel>> k = r.get(spec, v);
  EXPECT_TRUE(k.ok()) << (k.ok() ? "" : format(k.errors()));
  return k.ok() ? k.value() : nullptr;
}

std::vector<std::string> entry_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& f : fs::directory_iterator(dir + "/kernels")) out.push_back(f.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

class RuntimeCache : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir() + "/cache"; }
  void TearDown() override { fs::remove_all(fs::path(dir_).parent_path()); }
  RuntimeOptions options(uint64_t max_bytes = uint64_t{1} << 30) const { return {dir_, max_bytes}; }
  std::string dir_;
};

TEST_F(RuntimeCache, MemoryHitReturnsTheSameKernel) {
  const RopeSpec spec = spec_from(kFull);
  Runtime r(options());
  auto first = get(r, spec, variant(false));
  auto second = get(r, spec, variant(false));
  EXPECT_EQ(first.get(), second.get());
  // For implicit positions the id width is not part of the kernel.
  EXPECT_EQ(get(r, spec, variant(false, 64)).get(), first.get());
  const CacheCounters c = r.counters();
  EXPECT_EQ(c.memory_misses, 1u);
  EXPECT_EQ(c.memory_hits, 2u);
  EXPECT_EQ(c.compiles, 1u);
  EXPECT_EQ(c.disk_hits, 0u);
  EXPECT_EQ(entry_files(dir_).size(), 1u);
}

TEST_F(RuntimeCache, ANewRuntimeLoadsFromDiskWithoutCompiling) {
  const RopeSpec spec = spec_from(kFull);
  std::string compiled, loaded;
  {
    Runtime r(options());
    compiled = run_kernel(*get(r, spec, variant(true)), spec, variant(true));
    EXPECT_EQ(r.counters().compiles, 1u);
  }
  Runtime fresh(options());
  loaded = run_kernel(*get(fresh, spec, variant(true)), spec, variant(true));
  const CacheCounters c = fresh.counters();
  EXPECT_EQ(c.compiles, 0u);
  EXPECT_EQ(c.disk_hits, 1u);
  EXPECT_EQ(compiled, loaded);
  // Both Runtimes' counters reached the stats file.
  const CacheCounters total = runtime::read_stats(runtime::DiskCache::open(dir_, 1 << 30).value());
  EXPECT_EQ(total.compiles, 1u);
  EXPECT_EQ(total.disk_hits, 1u);
  EXPECT_EQ(total.memory_misses, 2u);
}

// A kv_cache spec's kernels (the append without and with v) are disk
// entries like any other, not JIT fallbacks.
TEST_F(RuntimeCache, KvCacheKernelsAreCachedOnDisk) {
  const RopeSpec spec = spec_from(
      "name: kv\nhead_dim: 16\ndtype: bf16\nlayout: thd\npositions: explicit\nkv_cache:\n  layout: paged_nhd\n  "
      "page_size: 4\n");
  for (bool with_v : {false, true}) {
    lowering::KernelVariant v = variant(false);
    v.with_v = with_v;
    {
      Runtime r(options());
      ASSERT_TRUE(r.get(spec, v)) << with_v;
      EXPECT_EQ(r.counters().compiles, 1u) << with_v;
      EXPECT_EQ(r.counters().jit_fallbacks, 0u) << r.counters().last_fallback;
    }
    Runtime fresh(options());
    ASSERT_TRUE(fresh.get(spec, v)) << with_v;
    EXPECT_EQ(fresh.counters().disk_hits, 1u) << with_v;
  }
}

TEST_F(RuntimeCache, LoadedKernelsMatchTheJitKernelBitForBit) {
  Runtime r(options());
  struct Case {
    const char* spec;
    lowering::KernelVariant v;
    bool in_place;
  };
  for (const Case& c : {Case{kFull, variant(false), false}, Case{kPartial, variant(true, 64), false},
                        Case{kPartial, variant(false, 32), true}, Case{kPackedYarn, variant(true), false}}) {
    const RopeSpec spec = spec_from(c.spec);
    SCOPED_TRACE(fmt::format("{} {} in_place={}", spec.name, runtime::variant_tag(spec, c.v), c.in_place));
    const std::string want = run_jit(spec, c.v, c.in_place);
    EXPECT_EQ(run_kernel(*get(r, spec, c.v), spec, c.v, c.in_place), want);
    // The same from a fresh process's point of view: loaded from disk.
    Runtime fresh(options());
    EXPECT_EQ(run_kernel(*get(fresh, spec, c.v), spec, c.v, c.in_place), want);
    EXPECT_EQ(fresh.counters().disk_hits, 1u);
  }
  // The pass-through dims really were copied (no canary left in out_q).
  const RopeSpec partial = spec_from(kPartial);
  std::unique_ptr<CallData> call = make_call(partial, variant(false, 64));
  EXPECT_TRUE(get(r, partial, variant(false, 64))->run(call->call).ok());
  EXPECT_EQ(std::memcmp(call->out_q->data(), call->q->data(), 8 * 2), 0);  // dims 0..7 of the first token
}

// Vulkan kernels are disk entries too (their own Halide runtime runs host
// calls, staged): compiled once, loaded by a fresh Runtime, the host's bits.
// Device calls on loaded kernels: the VulkanDeviceMemory tests (their
// kernels come from the tests' cache).
TEST_F(RuntimeCache, VulkanKernelsAreCachedOnDiskWithTheHostsBits) {
  const Result<Halide::Target> vulkan = runtime::runnable_target("vulkan");
  if (!vulkan) GTEST_SKIP() << "no vulkan device: " << format(vulkan.errors());
  struct Case {
    const char* spec;
    lowering::KernelVariant v;
    bool in_place;
  };
  for (const Case& c : {Case{kPartial, variant(true, 64), false}, Case{kPackedYarn, variant(true), true}}) {
    const RopeSpec spec = spec_from(c.spec);
    SCOPED_TRACE(fmt::format("{} {} in_place={}", spec.name, runtime::variant_tag(spec, c.v), c.in_place));
    const std::string want = run_jit(spec, c.v, c.in_place);
    {
      Runtime r(options());
      Result<std::shared_ptr<Kernel>> k = r.get(spec, c.v, vulkan->to_string());
      ASSERT_TRUE(k.ok()) << format(k.errors());
      EXPECT_EQ(run_kernel(**k, spec, c.v, c.in_place), want);
      EXPECT_EQ(r.counters().compiles, 1u);
      EXPECT_EQ(r.counters().jit_fallbacks, 0u) << r.counters().last_fallback;
    }
    Runtime fresh(options());
    Result<std::shared_ptr<Kernel>> k = fresh.get(spec, c.v, vulkan->to_string());
    ASSERT_TRUE(k.ok()) << format(k.errors());
    EXPECT_EQ(run_kernel(**k, spec, c.v, c.in_place), want);
    EXPECT_EQ(fresh.counters().disk_hits, 1u);
    EXPECT_EQ(fresh.counters().compiles, 0u);
  }
}

TEST_F(RuntimeCache, ThreadsAndRuntimesAskingAtOnceCompileOnce) {
  const RopeSpec spec = spec_from(kFull);
  Runtime a(options()), b(options());
  std::vector<std::shared_ptr<Kernel>> got(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { got[i] = get(i % 2 ? a : b, spec, variant(true)); });
  for (auto& t : threads) t.join();
  for (int i = 2; i < 8; ++i) EXPECT_EQ(got[i].get(), got[i % 2].get());
  const CacheCounters ca = a.counters(), cb = b.counters();
  EXPECT_EQ(ca.compiles + cb.compiles, 1u);       // one built it under the key's lock...
  EXPECT_EQ(ca.disk_hits + cb.disk_hits, 1u);     // ...the other found its entry
  EXPECT_EQ(ca.memory_misses + cb.memory_misses, 2u);
  EXPECT_EQ(ca.memory_hits + cb.memory_hits, 6u);
  EXPECT_EQ(entry_files(dir_).size(), 1u);
  // Loaded kernels may run from several threads at once.
  const std::string want = run_kernel(*got[0], spec, variant(true));
  threads.clear();
  std::vector<std::string> results(4);
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { results[i] = run_kernel(*got[i], spec, variant(true)); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, want);
}

TEST_F(RuntimeCache, DifferentKernelsCompileInParallelThreads) {
  const std::vector<RopeSpec> specs = {spec_from(kFull), spec_from(kPartial), spec_from(kPackedYarn)};
  Runtime r(options());
  std::vector<std::shared_ptr<Kernel>> got(specs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < specs.size(); ++i) threads.emplace_back([&, i] { got[i] = get(r, specs[i], variant(true)); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(r.counters().compiles, specs.size());
  EXPECT_EQ(entry_files(dir_).size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(specs[i].name);
    ASSERT_TRUE(got[i]);
    EXPECT_EQ(run_kernel(*got[i], specs[i], variant(true)), run_jit(specs[i], variant(true)));
  }
}

// check_entry on a file by its name.
runtime::EntryCheck check_file(const std::string& path, const std::string& tag) {
  runtime::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return runtime::check_entry(fd.get(), tag);
}

// An entry's payload sealed with another tag, in place of the entry: a
// well-formed file written for something else.
void reseal_with_tag(const std::string& entry, const std::string& bytes, const std::string& tag) {
  uint64_t payload = 0;
  std::memcpy(&payload, bytes.data() + bytes.size() - 32, 8);
  const std::string tmp = entry + ".payload";
  test::write_text(tmp, bytes.substr(0, payload));
  ASSERT_FALSE(runtime::seal_entry(tmp, tag).has_value());
  fs::rename(tmp, entry);
}

TEST_F(RuntimeCache, DamagedOrForeignEntriesAreRemovedAndRebuilt) {
  const RopeSpec spec = spec_from(kFull), other = spec_from(kPackedYarn);
  std::string want, entry, other_entry;
  {
    Runtime r(options());
    want = run_kernel(*get(r, spec, variant(false)), spec, variant(false));
    entry = entry_files(dir_).at(0);
    get(r, other, variant(false));
  }
  for (const std::string& f : entry_files(dir_))
    if (f != entry) other_entry = f;
  const std::string original = test::read_text(entry);
  const std::string key_text = runtime::cache_key(spec, variant(false), Halide::get_host_target()).text;

  // Each damaged file is a new inode: this process still has the entries it
  // loaded mapped, and changing a mapped file in place would break its code.
  const auto replace = [&](const std::string& bytes) {
    test::write_text(entry + ".new", bytes);
    fs::rename(entry + ".new", entry);
  };
  const std::vector<std::pair<std::string, std::function<void()>>> damage = {
      {"truncated", [&] { replace(original.substr(0, original.size() / 2)); }},
      {"bytes flipped", [&] {
         std::string b = original;
         for (size_t i = 1000; i < b.size() - 100; i += 4099) b[i] = static_cast<char>(~b[i]);
         replace(b);
       }},
      {"trailer only", [&] { replace(original.substr(original.size() - 32)); }},
      {"not an entry", [&] { replace(std::string(4096, 'x')); }},
      {"empty", [&] { replace(""); }},
      {"older rope-gen", [&] {
         std::string tag = key_text;
         tag.replace(tag.find("rope-gen "), 9, "rope-gen 0.0.1-old ");
         reseal_with_tag(entry, original, tag);
       }},
      {"another kernel's entry", [&] { replace(test::read_text(other_entry)); }},
  };
  for (const auto& [what, apply_damage] : damage) {
    SCOPED_TRACE(what);
    apply_damage();
    const runtime::EntryCheck check = check_file(entry, key_text);
    EXPECT_NE(check.status, runtime::EntryCheck::Status::Ok);
    Runtime r(options());
    auto kernel = get(r, spec, variant(false));
    ASSERT_TRUE(kernel);
    EXPECT_EQ(run_kernel(*kernel, spec, variant(false)), want);
    const CacheCounters c = r.counters();
    EXPECT_EQ(c.damaged_evicted, 1u);
    EXPECT_EQ(c.compiles, 1u);
    EXPECT_EQ(c.jit_fallbacks, 0u);
    EXPECT_EQ(check_file(entry, key_text).status, runtime::EntryCheck::Status::Ok);
  }
}

TEST_F(RuntimeCache, SizeCapEvictsTheLeastRecentlyUsed) {
  const RopeSpec a = spec_from("name: a\nhead_dim: 16\n"), b = spec_from("name: b\nhead_dim: 16\n"),
                 c = spec_from("name: c\nhead_dim: 16\n");
  uint64_t size = 0;
  {
    Runtime r(options());
    get(r, a, variant(false));
    size = fs::file_size(entry_files(dir_).at(0));
  }
  const uint64_t cap = size * 5 / 2;  // two entries fit, three do not
  {
    Runtime r(options(cap));
    get(r, b, variant(false));
    EXPECT_EQ(r.counters().lru_evicted, 0u);
  }
  const auto key = [](const RopeSpec& s) { return runtime::cache_key(s, variant(false), Halide::get_host_target()).hex; };
  Runtime r(options(cap));
  get(r, a, variant(false));  // a is now used more recently than b
  EXPECT_EQ(r.counters().disk_hits, 1u);
  get(r, c, variant(false));
  EXPECT_EQ(r.counters().lru_evicted, 1u);
  std::vector<std::string> left;
  for (const auto& f : entry_files(dir_)) left.push_back(fs::path(f).stem().string());
  std::vector<std::string> want = {key(a), key(c)};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(left, want);
}

TEST_F(RuntimeCache, AnUnusableCacheDirectoryFallsBackToJit) {
  const RopeSpec spec = spec_from(kFull);
  const std::string want = run_jit(spec, variant(false));
  fs::create_directories(fs::path(dir_).parent_path());
  test::write_text(dir_, "a file, not a directory");
  Runtime r(options());
  EXPECT_EQ(run_kernel(*get(r, spec, variant(false)), spec, variant(false)), want);
  EXPECT_EQ(r.counters().jit_fallbacks, 1u);

  // Others could plant code in a group- or world-writable directory: never load from it.
  const std::string shared = fs::path(dir_).parent_path().string() + "/shared";
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::group_write, fs::perm_options::add);
  Result<runtime::DiskCache> opened = runtime::DiskCache::open(shared, 1 << 30);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.errors()[0].message.find("writable by others"), std::string::npos);
  Runtime s(RuntimeOptions{shared, 1 << 30});
  EXPECT_TRUE(get(s, spec, variant(false)));
  EXPECT_EQ(s.counters().jit_fallbacks, 1u);

  // No linker: the kernel is JIT-compiled, and nothing half-built is left.
  const std::string fine = fs::path(dir_).parent_path().string() + "/fine";
  ::setenv("ROPEGEN_CXX", "/nonexistent/c++", 1);
  Runtime t(RuntimeOptions{fine, 1 << 30});
  auto kernel = get(t, spec, variant(false));
  ::unsetenv("ROPEGEN_CXX");
  ASSERT_TRUE(kernel);
  EXPECT_EQ(run_kernel(*kernel, spec, variant(false)), want);
  EXPECT_EQ(t.counters().jit_fallbacks, 1u);
  EXPECT_TRUE(fs::is_empty(fine + "/kernels"));
  EXPECT_TRUE(fs::is_empty(fine + "/tmp"));
}

TEST(CacheKey, EveryInputThatChangesTheCodeChangesTheKey) {
  const RopeSpec full = spec_from(kFull), partial = spec_from(kPartial);
  const Halide::Target host = Halide::get_host_target(), x86("x86-64-linux-sse41");
  auto key = [](const RopeSpec& s, lowering::KernelVariant v, const Halide::Target& t) { return runtime::cache_key(s, v, t).hex; };
  EXPECT_EQ(key(full, variant(false, 32), host), key(full, variant(false, 64), host));
  EXPECT_NE(key(partial, variant(false, 32), host), key(partial, variant(false, 64), host));
  EXPECT_NE(key(full, variant(false), host), key(full, variant(true), host));
  EXPECT_NE(key(full, variant(false), host), key(full, variant(false), x86));
  EXPECT_NE(key(full, variant(false), host), key(spec_from("name: full\nhead_dim: 16\ndtype: f16\n"), variant(false), host));
  const runtime::KeyFields f = runtime::key_fields(runtime::cache_key(partial, variant(true, 64), x86).text);
  EXPECT_EQ(f.spec_name, "partial");
  EXPECT_EQ(f.variant, "qk_i64");
  EXPECT_EQ(f.target, "x86-64-linux-sse41");
  EXPECT_EQ(f.spec_hash, spec_hash(partial));
}

TEST(RuntimeOptionsTest, CacheSizeFromTheEnvironment) {
  ::setenv("ROPEGEN_CACHE_MAX_BYTES", "512M", 1);
  EXPECT_EQ(RuntimeOptions::from_environment().value().max_bytes, uint64_t{512} << 20);
  ::setenv("ROPEGEN_CACHE_MAX_BYTES", "lots", 1);
  EXPECT_FALSE(RuntimeOptions::from_environment().ok());
  ::unsetenv("ROPEGEN_CACHE_MAX_BYTES");
  EXPECT_EQ(RuntimeOptions::from_environment().value().max_bytes, uint64_t{1} << 30);
}

}  // namespace
}  // namespace ropegen
