#include "loaded_kernel.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>

#include <fmt/format.h>

#include "runtime/call_binding.h"
#include "runtime/call_parts.h"
#include "runtime/unique_fd.h"

namespace ropegen::runtime {
namespace {

using ArgvFunction = int (*)(void**);
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

Diagnostic error(const std::string& path, std::string message) { return Diagnostic{{path, -1, -1}, std::move(message), {}}; }

// One entry point and where each of its arguments comes from.
struct Function {
  ArgvFunction argv = nullptr;
  std::vector<ArgumentSource> sources;  // in call order
  std::string name;
};

Result<Function> resolve(void* handle, const std::string& path, const std::string& symbol,
                         std::optional<ArgumentSource> (*source_of)(std::string_view)) {
  Function f;
  f.name = symbol;
  f.argv = reinterpret_cast<ArgvFunction>(dlsym(handle, (symbol + "_argv").c_str()));
  auto metadata = reinterpret_cast<MetadataFunction>(dlsym(handle, (symbol + "_metadata").c_str()));
  if (!f.argv || !metadata) return error(path, fmt::format("{} has no entry point {}", path, symbol));
  const halide_filter_metadata_t* md = metadata();
  if (!md || md->version != 1 || md->num_arguments < 1 || md->num_arguments > 16)
    return error(path, fmt::format("{}: unexpected Halide metadata for {}", path, symbol));
  for (int i = 0; i < md->num_arguments; ++i) {
    const halide_filter_argument_t& a = md->arguments[i];
    std::optional<ArgumentSource> source = source_of(a.name ? a.name : "");
    const bool scalar = a.kind == halide_argument_kind_input_scalar;
    const bool fits = source && (scalar ? source->rope_scalar && a.type.code == halide_type_int && a.type.bits == 64
                                        : !source->rope_scalar);
    if (!fits) return error(path, fmt::format("{}: {} takes an argument `{}` rope-gen does not bind", path, symbol, a.name));
    f.sources.push_back(*source);
  }
  return f;
}

class LoadedKernel : public Kernel {
 public:
  LoadedKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, Function rope,
               std::optional<Function> pass_through)
      : spec_(lowering::kernel_spec(spec, variant)), variant_(variant), rope_(std::move(rope)), pass_through_(std::move(pass_through)) {}

  void run(const RopeCall& call) override {
    run_in_parts(spec_, call, [this](const BufferCall& part) { run_part(part); });
  }

 private:
  void run_part(const BufferCall& part) {
    BoundCall bound = bind_call(spec_, variant_, part);
    invoke(rope_, [&](const ArgumentSource& s) -> void* {
      if (s.rope_scalar) return &(bound.rope.*s.rope_scalar);
      return raw(bound.rope.*s.rope_buffer);
    });
    for (PassThroughArguments& copy : bound.pass_through)
      invoke(*pass_through_, [&](const ArgumentSource& s) -> void* { return raw(copy.*s.copy_buffer); });
  }


  static void* raw(Halide::Buffer<>& b) { return b.defined() ? b.raw_buffer() : nullptr; }

  template <typename ArgumentOf>
  static void invoke(const Function& f, ArgumentOf argument_of) {
    void* argv[16];
    for (size_t i = 0; i < f.sources.size(); ++i) argv[i] = argument_of(f.sources[i]);
    if (const int code = f.argv(argv); code != 0) {
      std::lock_guard<std::mutex> lock(last_error_mutex);
      throw std::runtime_error(fmt::format("{} failed with Halide error {}: {}", f.name, code, last_error));
    }
  }

  RopeSpec spec_;
  lowering::KernelVariant variant_;
  Function rope_;
  std::optional<Function> pass_through_;
};

}  // namespace

Result<std::shared_ptr<Kernel>> load_kernel(int fd, const std::string& path, const RopeSpec& spec,
                                            const lowering::KernelVariant& variant, const KernelSymbols& symbols) {
  // dlopen takes a name, and returns an object already loaded under the
  // same name without opening anything: a descriptor's /proc name must never
  // be reused. So a descriptor of its own is kept open as long as the object
  // is loaded (for the life of the process).
  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own.valid()) return error(path, fmt::format("cannot load {}: {}", path, std::strerror(errno)));
  // RTLD_LOCAL: nothing in the object joins the process's global scope.
  void* handle = dlopen(fmt::format("/proc/self/fd/{}", own.get()).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return error(path, fmt::format("cannot load {}: {}", path, why ? why : "unknown error"));
  }
  (void)own.release();
  if (auto set_handler = reinterpret_cast<SetErrorHandler>(dlsym(handle, "halide_set_error_handler")))
    set_handler(capture_error);
  Result<Function> rope = resolve(handle, path, symbols.rope, rope_argument);
  if (!rope) return rope.errors();
  std::optional<Function> pass_through;
  if (!symbols.pass_through.empty()) {
    Result<Function> f = resolve(handle, path, symbols.pass_through, pass_through_argument);
    if (!f) return f.errors();
    pass_through = std::move(f).value();
  }
  return std::shared_ptr<Kernel>(std::make_shared<LoadedKernel>(spec, variant, std::move(rope).value(), std::move(pass_through)));
}

}  // namespace ropegen::runtime
