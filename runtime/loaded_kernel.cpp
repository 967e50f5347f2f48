#include "loaded_kernel.h"

#include "fork_guard.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>

#include <fmt/format.h>

#include "call/argv_entry.h"
#include "call/contract.h"
#include "lowering/rope_algorithm.h"
#include "runtime/unique_fd.h"

namespace ropegen::runtime {
namespace {

using MetadataFunction = const halide_filter_metadata_t* (*)();
using SetErrorHandler = halide_error_handler_t (*)(halide_error_handler_t);

// A loaded runtime reports errors through this handler instead of printing
// them; run() puts the message in its exception. Errors can be reported
// from the runtime's worker threads, hence a lock rather than a thread_local.
std::mutex last_error_mutex;
std::string last_error;
void capture_error(void*, const char* message) {
  std::lock_guard<std::mutex> lock(last_error_mutex);
  last_error = message;
}

Result<call::ArgvEntry> resolve(void* handle, const std::string& path, const std::string& symbol, bool pass_through) {
  auto argv = reinterpret_cast<call::ArgvFunction>(dlsym(handle, (symbol + "_argv").c_str()));
  auto metadata = reinterpret_cast<MetadataFunction>(dlsym(handle, (symbol + "_metadata").c_str()));
  // The object's own runtime's pool (shared_object.cpp exports it).
  auto pool_threads = reinterpret_cast<int (*)()>(dlsym(handle, "halide_get_num_threads"));
  return call::resolve_entry(path, symbol, argv, metadata ? metadata() : nullptr, pass_through, pool_threads);
}

class LoadedKernel : public CompiledKernel {
 public:
  LoadedKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, call::ArgvEntry rope,
               std::optional<call::ArgvEntry> pass_through)
      : contract_(call::call_contract(lowering::kernel_spec(spec, variant))),
        rope_(std::move(rope)),
        pass_through_(std::move(pass_through)) {}

  void run(const call::PreparedCall& call) override {
    // The disk cache holds CPU kernels only (GPU targets run as JIT kernels).
    if (call.on_device()) throw KernelFailure(device_mismatch(call, "the host (cpu)"));
    const call::ArgvEntry* failed = nullptr;
    if (const int code = call::run_prepared(contract_, call, nullptr, rope_, pass_through_ ? &*pass_through_ : nullptr,
                                            &failed)) {
      std::lock_guard<std::mutex> lock(last_error_mutex);
      throw KernelFailure(fmt::format("{} failed with Halide error {}: {}", failed ? failed->name : "a kernel", code, last_error));
    }
  }

 private:
  ropegen_contract contract_;
  call::ArgvEntry rope_;
  std::optional<call::ArgvEntry> pass_through_;
};

}  // namespace

Result<std::shared_ptr<CompiledKernel>> load_kernel(int fd, const std::string& path, const RopeSpec& spec,
                                            const lowering::KernelVariant& variant, const KernelSymbols& symbols) {
  // dlopen takes a name, and returns an object already loaded under the
  // same name without opening anything: a descriptor's /proc name must never
  // be reused. So a descriptor of its own is kept open as long as the object
  // is loaded (for the life of the process).
  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own.valid()) return named_error(path, fmt::format("cannot load {}: {}", path, std::strerror(errno)));
  // RTLD_LOCAL: nothing in the object joins the process's global scope.
  void* handle = dlopen(fmt::format("/proc/self/fd/{}", own.get()).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return named_error(path, fmt::format("cannot load {}: {}", path, why ? why : "unknown error"));
  }
  (void)own.release();
  if (auto set_handler = reinterpret_cast<SetErrorHandler>(dlsym(handle, "halide_set_error_handler")))
    set_handler(capture_error);
  if (auto shutdown_pool = reinterpret_cast<void (*)()>(dlsym(handle, "halide_shutdown_thread_pool")))
    guard_thread_pool(shutdown_pool);
  Result<call::ArgvEntry> rope = resolve(handle, path, symbols.rope, false);
  if (!rope) return rope.errors();
  std::optional<call::ArgvEntry> pass_through;
  if (!symbols.pass_through.empty()) {
    Result<call::ArgvEntry> f = resolve(handle, path, symbols.pass_through, true);
    if (!f) return f.errors();
    pass_through = std::move(f).value();
  }
  return std::shared_ptr<CompiledKernel>(std::make_shared<LoadedKernel>(spec, variant, std::move(rope).value(), std::move(pass_through)));
}

}  // namespace ropegen::runtime
