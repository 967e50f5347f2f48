#include "loaded_kernel.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "call/argv_entry.h"
#include "call/contract.h"
#include "fork_guard.h"
#include "lowering/rope_algorithm.h"
#include "runtime/device_call.h"
#include "runtime/halide_messages.h"
#include "runtime/jit_kernel.h"
#include "runtime/pipeline_arguments.h"
#include "runtime/unique_fd.h"

namespace ropegen::runtime {
namespace {

using MetadataFunction = const halide_filter_metadata_t* (*)();
using SetErrorHandler = halide_error_handler_t (*)(halide_error_handler_t);
using SetPrint = halide_print_t (*)(halide_print_t);

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

// What a Halide::Buffer handle refers to (the staging's buffers, shared
// with it: what the entry leaves there is what the staging reads).
halide_buffer_t* raw(Halide::Buffer<> handle) { return handle.defined() ? handle.raw_buffer() : nullptr; }

[[noreturn]] void throw_failure(const call::ArgvEntry* failed, int code) {
  std::lock_guard<std::mutex> lock(last_error_mutex);
  throw KernelFailure(
      fmt::format("{} failed with Halide error {}: {}", failed ? failed->name : "a kernel", code, last_error));
}

class LoadedKernel : public CompiledKernel {
 public:
  LoadedKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target,
               call::ArgvEntry rope, std::optional<call::ArgvEntry> pass_through)
      : spec_(spec),
        kernel_spec_(lowering::kernel_spec(spec, variant)),
        variant_(variant),
        target_(target),
        contract_(call::call_contract(kernel_spec_)),
        rope_(std::move(rope)),
        pass_through_(std::move(pass_through)) {}

  void run(const call::PreparedCall& call) override {
    if (target_.has_feature(Halide::Target::Vulkan)) return run_vulkan(call);
    if (call.on_device()) throw KernelFailure(device_mismatch(call, "the host (cpu)"));
    const call::ArgvEntry* failed = nullptr;
    if (const int code =
            call::run_prepared(contract_, call, nullptr, rope_, pass_through_ ? &*pass_through_ : nullptr, &failed))
      throw_failure(failed, code);
  }

 private:
  // A host call staged through device buffers of the object's own Vulkan
  // runtime (runtime/device_call.h). A device call's tensors are buffers of
  // Halide's JIT runtime (runtime/device_memory.h), which this object's
  // runtime cannot use: it runs on a JIT kernel of the same spec, compiled
  // at the first device call.
  void run_vulkan(const call::PreparedCall& call) {
    if (call.on_device()) return run_on_jit_kernel(call);
    run_staged(call, kernel_spec_, variant_, target_,
               {[&](const PipelineArguments& a) {
                  abi::ByTensor<halide_buffer_t*> tensors;
                  for (abi::Arg arg : abi::kTensorArgs) tensors[arg] = raw(a[arg]);
                  abi::Scalars scalars = a.scalars;
                  if (const int code = call::call_rope(rope_, tensors, scalars, nullptr)) throw_failure(&rope_, code);
                },
                [&](const PipelineCopy& c) {
                  if (const int code = call::call_copy(*pass_through_, raw(c.in), raw(c.out), nullptr))
                    throw_failure(&*pass_through_, code);
                },
                nullptr});
  }

  void run_on_jit_kernel(const call::PreparedCall& call) {
    std::lock_guard<std::mutex> lock(jit_mutex_);  // a JIT kernel binds its parameters on every run
    if (!jit_) {
      try {
        jit_ = std::make_unique<JitKernel>(spec_, variant_, target_);
      } catch (const Halide::Error& e) {
        throw KernelFailure(
            fmt::format("Halide cannot compile {} for {}: {}", spec_.name, target_.to_string(), e.what()));
      }
    }
    jit_->run(call);
  }

  RopeSpec spec_;         // as asked for: a JIT kernel takes it
  RopeSpec kernel_spec_;  // lowering::kernel_spec: what the object computes
  lowering::KernelVariant variant_;
  Halide::Target target_;
  ropegen_contract contract_;
  call::ArgvEntry rope_;
  std::optional<call::ArgvEntry> pass_through_;
  std::mutex jit_mutex_;
  std::unique_ptr<JitKernel> jit_;  // device calls'
};

}  // namespace

Result<std::shared_ptr<CompiledKernel>> load_kernel(int fd, const std::string& path, const RopeSpec& spec,
                                                    const lowering::KernelVariant& variant,
                                                    const Halide::Target& target, const KernelSymbols& symbols) {
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
  // What the runtime prints (Vulkan's allocator settings) as a JIT kernel's runtime prints it.
  if (auto set_print = reinterpret_cast<SetPrint>(dlsym(handle, "halide_set_custom_print")))
    set_print([](void*, const char* message) { quiet_runtime_print(nullptr, message); });
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
  return std::shared_ptr<CompiledKernel>(
      std::make_shared<LoadedKernel>(spec, variant, target, std::move(rope).value(), std::move(pass_through)));
}

}  // namespace ropegen::runtime
