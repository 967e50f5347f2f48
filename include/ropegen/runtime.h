// ropegen::Runtime: compiled kernels on demand, through a three-level cache.
//
//   memory   kernels this Runtime has handed out (a hit costs microseconds)
//   disk     shared objects in the cache directory, loaded with dlopen (a new
//            process loads one in milliseconds); shared by every process
//   compile  Halide compiles the spec on a miss, seconds
//
// An entry is named by a hash of the normalised spec, the kernel variant,
// the target, rope-gen's version and build, and Halide's version. Entries
// are checked (size, checksum, ABI tag) before they are loaded; a damaged
// or foreign file is removed and rebuilt. Threads and processes asking for
// the same kernel at once compile it once. Targets that cannot be loaded
// into this process as a shared object, or a cache directory that cannot
// be used, fall back to a JIT kernel held in memory only. Nothing another
// user could have written is loaded, and a lock another process holds too
// long is not waited for: both are refused with a one-line warning on
// stderr, and the kernel is JIT-compiled.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ropegen/call.h"
#include "ropegen/kernel.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen {

// Per level: what was found there, and what it cost.
struct CacheCounters {
  uint64_t memory_hits = 0, memory_misses = 0;
  uint64_t disk_hits = 0, disk_misses = 0;
  uint64_t compiles = 0;          // shared objects built (each a disk miss)
  uint64_t damaged_evicted = 0;   // truncated, corrupt or foreign entries removed
  uint64_t lru_evicted = 0;       // entries removed to stay under the size cap
  uint64_t jit_fallbacks = 0;     // kernels JIT-compiled in memory instead
  uint64_t refused = 0;           // untrusted files or directories, locks held too long (each also a JIT fallback)
  double compile_seconds = 0;     // total over `compiles` (Halide + link + first load)
  double disk_load_seconds = 0;   // total over `disk_hits` (check + dlopen)
  std::string last_fallback;      // why the latest JIT fallback happened (one line); += keeps the newer

  CacheCounters& operator+=(const CacheCounters& other);
};

struct RuntimeOptions {
  std::string cache_dir;              // empty: no disk level
  uint64_t max_bytes = uint64_t{1} << 30;
  // The longest wait for a lock another process holds (it builds the same
  // kernel, normally for about a second) before compiling in memory instead.
  std::chrono::milliseconds lock_wait = std::chrono::seconds(30);

  // ROPEGEN_CACHE_DIR (default $XDG_CACHE_HOME/rope-gen or ~/.cache/rope-gen)
  // and ROPEGEN_CACHE_MAX_BYTES (bytes, or with a K/M/G suffix).
  static Result<RuntimeOptions> from_environment();
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options);
  ~Runtime();  // adds what this Runtime counted to the cache's stats file
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process's Runtime, configured from the environment (rope-gen apply,
  // bench). A bad environment makes every get() return its diagnostics.
  static Runtime& process();

  // A kernel of `spec` for `variant` on `target` ("host" or a Halide target
  // string such as "host-cuda"). Thread-safe, and so are its kernels. A GPU
  // target's kernels run calls on its device's tensors where they are and
  // stage calls on host tensors (ropegen/device_memory.h). Before the first
  // CUDA kernel, if no default is set, rope-gen gives Halide's JIT a default
  // library loader that finds libcuda.so.1 for Halide 21's "libcuda.so" and
  // loads everything else as Halide's default does (Halide has no per-call
  // hook for it); set your own default JITHandlers::custom_load_library
  // before, to keep yours.
  Result<std::shared_ptr<Kernel>> get(const RopeSpec& spec, const KernelVariant& variant,
                                      const std::string& target = "host");

  // get() the kernel `call` needs (prepare_call works out its variant) and
  // run it: the one-line way to apply a spec.
  Status run(const RopeSpec& spec, const Call& call, const std::string& target = "host");

  // What this Runtime has counted so far (the stats file holds every process's).
  CacheCounters counters() const;
  const RuntimeOptions& options() const;

 private:
  struct State;
  Runtime(RuntimeOptions options, std::vector<Diagnostic> config_errors);
  std::unique_ptr<State> state_;
};

}  // namespace ropegen
