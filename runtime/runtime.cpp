// ropegen::Runtime: the memory level, and the order of the others (disk,
// then compile under the key's lock, then the JIT fallback).
#include "ropegen/runtime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "ropegen/spec_io.h"
#include "call/contract.h"
#include "call/prepare_call.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_key.h"
#include "runtime/cache_stats.h"
#include "runtime/device_probe.h"
#include "runtime/disk_cache.h"
#include "runtime/fd_io.h"
#include "runtime/fork_guard.h"
#include "runtime/host_cpu.h"
#include "runtime/jit_kernel.h"
#include "runtime/loaded_kernel.h"
#include "runtime/shared_object.h"
#include "targets/target_names.h"

namespace ropegen {
namespace {

using runtime::CompiledKernel;
using KernelResult = Result<std::shared_ptr<CompiledKernel>>;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A reason as one line, for the stats file and its one-line report.
std::string one_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  for (char& c : text)
    if (c == '\n') c = ' ';
  return text;
}

// A JIT kernel binds its parameters on every run; the lock lets it be
// shared like the reentrant loaded kernels.
class SerializedKernel : public CompiledKernel {
 public:
  explicit SerializedKernel(std::unique_ptr<CompiledKernel> kernel) : kernel_(std::move(kernel)) {}
  void run(const call::PreparedCall& call) override {
    std::lock_guard<std::mutex> lock(mutex_);
    kernel_->run(call);
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<CompiledKernel> kernel_;
};

// What Runtime hands out: every call prepared (call/prepare_call.h) for the
// spec, then run by the compiled kernel.
class PreparingKernel : public Kernel {
 public:
  PreparingKernel(const RopeSpec& spec, const KernelVariant& variant, std::string target,
                  std::shared_ptr<CompiledKernel> compiled)
      : spec_(spec), variant_(variant), contract_(call::call_contract(spec)), target_(std::move(target)),
        compiled_(std::move(compiled)) {}

  Status run(const Call& c) override {
    Result<call::PreparedCall> prepared = call::prepare_call(contract_, c);
    if (!prepared) return prepared.errors();
    return run_prepared(*prepared);
  }

  Status run_prepared(const call::PreparedCall& prepared) {
    if (prepared.variant != variant_)
      return named_error("call", fmt::format("this kernel was built for {} but the call has {}", describe(variant_),
                                             describe(prepared.variant)));
    try {
      const runtime::NotDuringFork running;  // a fork() waits for the run (runtime/fork_guard.h)
      compiled_->run(prepared);
    } catch (const runtime::KernelFailure& e) {
      return named_error(target_, fmt::format("running the kernel on {} failed: {}", target_, e.what()));
    } catch (const std::bad_alloc&) {
      return named_error(target_, "out of memory while running the kernel");
    }
    return {};
  }

  const RopeSpec& spec() const override { return spec_; }
  const KernelVariant& variant() const override { return variant_; }

 private:
  static std::string describe(const KernelVariant& v) {
    return fmt::format("{}{}{}{}", v.with_k ? "q and k" : "q alone", v.backward ? ", backward" : "",
                       v.position_type == IdType::Int64 ? ", int64 ids" : ", int32 ids",
                       v.float32_norm_weights ? ", float32 norm weights" : "");
  }

  RopeSpec spec_;
  KernelVariant variant_;
  ropegen_contract contract_;
  std::string target_;
  std::shared_ptr<CompiledKernel> compiled_;
};

// Shared objects built for another OS or architecture cannot be loaded
// here, nor CUDA code: its calls need the device's primary context and the
// call's stream, which only the JIT kernels' user context gives
// (runtime/cuda_context.h). Vulkan objects run host calls through their own
// runtime (runtime/loaded_kernel.h).
bool loadable_here(const Halide::Target& t) {
  static const Halide::Target host = Halide::get_host_target();
  return t.os == host.os && t.arch == host.arch && t.bits == host.bits && !t.has_feature(Halide::Target::CUDA) &&
         (!t.has_gpu_feature() || t.has_feature(Halide::Target::Vulkan));
}

std::optional<uint64_t> parse_bytes(const std::string& text) {
  size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string suffix = text.substr(used);
  const int shift = suffix.empty() ? 0 : suffix == "K" ? 10 : suffix == "M" ? 20 : suffix == "G" ? 30 : -1;
  if (shift < 0 || text[0] == '-' || value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace

CacheCounters& CacheCounters::operator+=(const CacheCounters& o) {
  memory_hits += o.memory_hits, memory_misses += o.memory_misses;
  disk_hits += o.disk_hits, disk_misses += o.disk_misses;
  compiles += o.compiles, damaged_evicted += o.damaged_evicted, lru_evicted += o.lru_evicted;
  jit_fallbacks += o.jit_fallbacks, refused += o.refused;
  if (!o.last_fallback.empty()) last_fallback = o.last_fallback;
  compile_seconds += o.compile_seconds, disk_load_seconds += o.disk_load_seconds;
  return *this;
}

Result<RuntimeOptions> RuntimeOptions::from_environment() {
  RuntimeOptions o;
  o.cache_dir = runtime::default_cache_dir();
  if (const char* cap = std::getenv("ROPEGEN_CACHE_MAX_BYTES"); cap && *cap) {
    const std::optional<uint64_t> bytes = parse_bytes(cap);
    if (!bytes)
      return named_error("ROPEGEN_CACHE_MAX_BYTES",
                         fmt::format("ROPEGEN_CACHE_MAX_BYTES={}: expected a size in bytes, optionally with K, M or G "
                                     "(e.g. 512M)",
                                     cap));
    o.max_bytes = *bytes;
  }
  return o;
}

struct Runtime::State {
  RuntimeOptions options;
  std::vector<Diagnostic> config_errors;

  std::once_flag disk_once;
  std::optional<runtime::DiskCache> disk;  // nullopt: no disk level (disk_problem says why)
  std::string disk_problem;
  bool disk_refused = false;  // a directory was configured but cannot be used

  std::mutex warned_mutex;
  std::set<std::string> warned;  // each warning once per Runtime

  mutable std::mutex mutex;  // guards memory and the counters
  std::unordered_map<std::string, std::shared_future<Result<std::shared_ptr<Kernel>>>> memory;
  CacheCounters counters, unflushed;

  template <typename Change>
  void count(Change change) {
    std::lock_guard<std::mutex> lock(mutex);
    change(counters);
    change(unflushed);
  }

  runtime::DiskCache* disk_level() {
    std::call_once(disk_once, [&] {
      if (options.cache_dir.empty()) {
        disk_problem = "no cache directory configured";
        return;
      }
      Result<runtime::DiskCache> opened =
          runtime::DiskCache::open(options.cache_dir, options.max_bytes, options.lock_wait);
      if (opened) disk.emplace(std::move(opened).value());
      else disk_problem = opened.errors().front().message, disk_refused = true;
    });
    return disk ? &*disk : nullptr;
  }

  // Adds what was counted since the last flush to the stats file (advisory:
  // a failure to write it is not an error of the get() that counted).
  void flush() {
    CacheCounters delta;
    {
      std::lock_guard<std::mutex> lock(mutex);
      delta = std::exchange(unflushed, CacheCounters{});
    }
    const CacheCounters& d = delta;
    if (d.memory_hits + d.memory_misses + d.disk_hits + d.disk_misses + d.compiles + d.damaged_evicted +
            d.lru_evicted + d.jit_fallbacks + d.refused ==
        0)
      return;  // nothing happened (the seconds only grow with hits and compiles)
    if (runtime::DiskCache* cache = disk_level()) (void)runtime::add_to_stats(*cache, delta);
  }

  KernelResult jit(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target,
                   const std::string& why) {
    runtime::verbose_note(fmt::format("JIT-compiling {} in memory only: {}", spec.name, why));
    count([&](CacheCounters& c) { ++c.jit_fallbacks, c.last_fallback = one_line(why); });
    try {
      return std::shared_ptr<CompiledKernel>(
          std::make_shared<SerializedKernel>(std::make_unique<runtime::JitKernel>(spec, variant, target)));
    } catch (const Halide::Error& e) {
      return named_error("target",
                         fmt::format("Halide cannot compile {} for {}: {}", spec.name, target.to_string(), e.what()));
    }
  }

  // A file or directory of the cache that others could have written, or a
  // lock held too long: said once on stderr, counted, and the kernel is
  // JIT-compiled instead (nothing of the cache is used or removed).
  void refuse(const std::string& why) {
    count([](CacheCounters& c) { ++c.refused; });
    std::lock_guard<std::mutex> lock(warned_mutex);
    if (warned.insert(why).second)
      std::fprintf(stderr, "rope-gen: kernel cache: warning: %s; compiling in memory instead\n", why.c_str());
  }

  struct Lookup {
    std::shared_ptr<CompiledKernel> kernel;  // the entry, loaded
    std::string refused;             // or why the file there must not be used
  };
  // The key's entry if it is on disk, trusted and sound. With `evict_bad`
  // (under the key's lock) a damaged or foreign file is removed.
  Lookup load_entry(runtime::DiskCache& cache, const runtime::CacheKey& key, const RopeSpec& spec,
                    const lowering::KernelVariant& variant, const Halide::Target& target, bool evict_bad) {
    const auto start = Clock::now();
    const std::string name = runtime::DiskCache::entry_name(key);
    const runtime::TrustedOpen file = cache.open_file(name);
    if (file.status == runtime::TrustedOpen::Status::Refused) return {nullptr, file.why};
    if (file.status == runtime::TrustedOpen::Status::Absent) return {};
    runtime::EntryCheck check = runtime::check_entry(file.fd.get(), key.text);
    if (check.status == runtime::EntryCheck::Status::Ok) {
      KernelResult kernel = runtime::load_kernel(file.fd.get(), cache.path(name), spec, variant, target,
                                                 runtime::kernel_symbols(spec, key));
      if (kernel) {
        cache.touch(key);
        const double took = seconds_since(start);
        count([&](CacheCounters& c) { ++c.disk_hits, c.disk_load_seconds += took; });
        return {kernel.value(), {}};
      }
      check = {runtime::EntryCheck::Status::Damaged, format(kernel.errors())};
    }
    if (evict_bad) evict_damaged(cache, name, check.why);
    return {};
  }

  void evict_damaged(runtime::DiskCache& cache, const std::string& name, const std::string& why) {
    runtime::verbose_note(fmt::format("removing {}: {}", cache.path(name), why));
    cache.remove(name);
    count([](CacheCounters& c) { ++c.damaged_evicted; });
  }

  // Halide's runtime for the target, written into `work` for the linker:
  // from the cache, or compiled now and kept there for the next kernel
  // (it is most of a cold compile).
  Result<std::string> runtime_object(runtime::DiskCache& cache, const Halide::Target& target, const std::string& work) {
    const runtime::CacheKey key = runtime::runtime_object_key(target);
    const std::string name = runtime::DiskCache::runtime_object_name(key), object = work + "/halide_runtime.o";
    // Whether the cached object is now in `object`; a refused file is an error.
    auto from_cache = [&](bool evict_bad) -> Result<bool> {
      const runtime::TrustedOpen file = cache.open_file(name);
      if (file.status == runtime::TrustedOpen::Status::Refused) {
        refuse(file.why);
        return named_error(cache.path(name), file.why);
      }
      if (file.status == runtime::TrustedOpen::Status::Absent) return false;
      std::string payload;
      const runtime::EntryCheck check = runtime::check_entry(file.fd.get(), key.text, &payload);
      if (check.status == runtime::EntryCheck::Status::Ok) {
        if (runtime::write_new_file(object, payload)) return true;
        return named_error(object, fmt::format("cannot write {}: {}", object, std::strerror(errno)));
      }
      if (evict_bad) evict_damaged(cache, name, check.why);
      return false;
    };
    Result<bool> found = from_cache(false);
    if (!found || *found) return found ? Result<std::string>(object) : found.errors();
    // After the kernel's lock, never before.
    Result<runtime::FileLock> held = cache.lock("runtime-" + key.hex.substr(0, 2), options.lock_wait);
    if (!held) return held.errors();
    found = from_cache(true);
    if (!found || *found) return found ? Result<std::string>(object) : found.errors();
    if (auto e = runtime::compile_runtime_object(target, object)) return *e;
    const std::string sealed = work + "/halide_runtime.sealed";
    std::error_code ec;
    std::filesystem::copy_file(object, sealed, ec);
    if (ec)
      runtime::verbose_note(fmt::format("cannot keep Halide's runtime object: {}", ec.message()));
    else if (auto e = runtime::seal_entry(sealed, key.text))
      runtime::verbose_note(format(*e));
    else if (auto e = cache.publish(sealed, name))
      runtime::verbose_note(format(*e));
    return object;
  }

  // Compiles, seals, loads (so only a loadable object is ever published),
  // publishes, then trims the cache to its cap. Under the key's lock.
  KernelResult build(runtime::DiskCache& cache, const runtime::CacheKey& key, const RopeSpec& spec,
                     const lowering::KernelVariant& variant, const Halide::Target& target) {
    const auto start = Clock::now();
    Result<std::string> work_name = cache.make_work_dir();
    if (!work_name) return work_name.errors();
    struct RemoveWhenDone {
      std::string dir;
      ~RemoveWhenDone() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    } remove_work{cache.path(*work_name)};
    const std::string& work = remove_work.dir;
    const runtime::KernelSymbols symbols = runtime::kernel_symbols(spec, key);
    Result<std::string> halide_runtime = runtime_object(cache, target, work);
    if (!halide_runtime) return halide_runtime.errors();
    Result<std::string> object = runtime::compile_shared_object(spec, variant, target, symbols, *halide_runtime, work);
    if (!object) return object.errors();
    if (auto e = runtime::seal_entry(*object, key.text)) return *e;
    // Loaded like any entry: the descriptor of the file checked.
    const runtime::TrustedOpen built = cache.open_file(*work_name + "/kernel.so");
    if (built.status != runtime::TrustedOpen::Status::Ok)
      return named_error(*object, built.why.empty() ? *object + " vanished" : built.why);
    KernelResult kernel = runtime::load_kernel(built.fd.get(), *object, spec, variant, target, symbols);
    if (!kernel) return kernel.errors();
    if (auto e = cache.publish(*object, runtime::DiskCache::entry_name(key)))
      runtime::verbose_note(format(*e));  // still a good kernel for this process
    const double took = seconds_since(start);
    const int evicted = cache.evict_to_fit(key.hex);
    count([&](CacheCounters& c) { ++c.compiles, c.compile_seconds += took, c.lru_evicted += evicted; });
    return kernel;
  }

  KernelResult acquire(const RopeSpec& spec, const lowering::KernelVariant& variant, const std::string& target_name) {
    Result<Halide::Target> parsed = targets::parse_target(target_name);
    if (!parsed) return parsed.errors();
    // Vulkan: for the device's version, as a JIT kernel is (and keyed by it).
    const Halide::Target target = runtime::with_device_version(*parsed);
    if (auto why = runtime::host_cpu_cannot_run(target)) return *why;  // its code would crash this process
    runtime::DiskCache* cache = disk_level();
    if (!cache) {
      if (disk_refused) refuse(disk_problem);
      return jit(spec, variant, target, disk_problem);
    }
    if (!loadable_here(target))
      return jit(spec, variant, target, "target " + target.to_string() + " cannot be loaded here");
    const runtime::CacheKey key = runtime::cache_key(spec, variant, target);
    Lookup found = load_entry(*cache, key, spec, variant, target, false);
    if (found.kernel) return found.kernel;
    auto refused_jit = [&](const std::string& why) {
      refuse(why);
      return jit(spec, variant, target, why);
    };
    if (!found.refused.empty()) return refused_jit(found.refused);
    // Whoever holds the lock builds; the others then find its entry.
    Result<runtime::FileLock> held = cache->lock_key(key);
    if (!held) return refused_jit(held.errors().front().message);
    found = load_entry(*cache, key, spec, variant, target, true);
    if (found.kernel) return found.kernel;
    if (!found.refused.empty()) return refused_jit(found.refused);
    count([](CacheCounters& c) { ++c.disk_misses; });
    KernelResult built = build(*cache, key, spec, variant, target);
    if (!built) return jit(spec, variant, target, format(built.errors()));
    return built;
  }
};

Runtime::Runtime(RuntimeOptions options) : Runtime(std::move(options), {}) {}

Runtime::Runtime(RuntimeOptions options, std::vector<Diagnostic> config_errors) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->config_errors = std::move(config_errors);
}

Runtime::~Runtime() { state_->flush(); }

Runtime& Runtime::process() {
  // Never destroyed: its kernels may hold JIT code whose Halide state must
  // not be torn down during static destruction. Counters still reach the
  // stats file at exit.
  static Runtime* const instance = [] {
    Result<RuntimeOptions> options = RuntimeOptions::from_environment();
    auto* r = options ? new Runtime(options.value()) : new Runtime(RuntimeOptions{}, options.errors());
    std::atexit([] { Runtime::process().state_->flush(); });
    return r;
  }();
  return *instance;
}

Result<std::shared_ptr<Kernel>> Runtime::get(const RopeSpec& spec, const KernelVariant& variant,
                                             const std::string& target) {
  using PublicResult = Result<std::shared_ptr<Kernel>>;
  State& s = *state_;
  if (!s.config_errors.empty()) return s.config_errors;
  // Exact in memory: the normalised text, not its hash.
  std::string key = to_yaml(spec);
  key += runtime::variant_tag(spec, variant);
  key += '\n';
  key += target;
  std::promise<PublicResult> promise;
  std::shared_future<PublicResult> found;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (auto it = s.memory.find(key); it != s.memory.end()) {
      ++s.counters.memory_hits, ++s.unflushed.memory_hits;
      found = it->second;
    } else {
      ++s.counters.memory_misses, ++s.unflushed.memory_misses;
      s.memory.emplace(key, promise.get_future().share());
    }
  }
  if (found.valid()) return found.get();  // waits while another thread is still building it
  PublicResult result = [&]() -> PublicResult {
    try {
      // GPU targets: the driver and a device must be there (a diagnostic, not Halide's abort).
      if (Result<Halide::Target> runnable = runtime::runnable_target(target); !runnable) return runnable.errors();
      KernelResult compiled = s.acquire(spec, variant, target);
      if (!compiled) return compiled.errors();
      return std::shared_ptr<Kernel>(std::make_shared<PreparingKernel>(spec, variant, target, std::move(compiled).value()));
    } catch (const std::exception& e) {
      return named_error("kernel cache", fmt::format("internal error while getting a kernel: {}", e.what()));
    } catch (const Halide::Error& e) {  // not a std::exception
      return named_error("kernel cache", fmt::format("Halide cannot compile this kernel: {}", e.what()));
    }
  }();
  promise.set_value(result);
  if (!result) {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.memory.erase(key);  // errors are not cached: the next call tries again
  }
  s.flush();
  return result;
}

Status Runtime::run(const RopeSpec& spec, const Call& c, const std::string& target) {
  Result<call::PreparedCall> prepared = call::prepare_call(spec, c);
  if (!prepared) return prepared.errors();
  Result<std::shared_ptr<Kernel>> kernel = get(spec, prepared->variant, target);
  if (!kernel) return kernel.errors();
  return static_cast<PreparingKernel&>(*kernel.value()).run_prepared(*prepared);  // get() makes only these
}

CacheCounters Runtime::counters() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->counters;
}

const RuntimeOptions& Runtime::options() const { return state_->options; }

}  // namespace ropegen
