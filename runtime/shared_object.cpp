#include "shared_object.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include "runtime/fd_io.h"
#include "runtime/memory_output.h"
#include "targets/aot/entry_points.h"

extern char** environ;

namespace ropegen::runtime {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The AOT entry point that computes this variant (and the pass-through copy).
std::vector<std::pair<targets::aot::EntryPoint, std::string>> entries_for(const RopeSpec& spec,
                                                                         const lowering::KernelVariant& variant,
                                                                         const KernelSymbols& symbols) {
  using Kind = targets::aot::EntryPoint::Kind;
  std::vector<std::pair<targets::aot::EntryPoint, std::string>> out;
  for (const targets::aot::EntryPoint& e : targets::aot::entry_points(spec)) {
    if (e.kind == Kind::PassThrough && !symbols.pass_through.empty()) out.emplace_back(e, symbols.pass_through);
    const bool same_positions = !e.explicit_positions || e.variant.position_type == variant.position_type;
    // One entry: kv_cache specs list the append with and without v.
    if (e.kind == Kind::Rope && e.variant.with_k == variant.with_k && e.variant.backward == variant.backward &&
        e.variant.with_v == variant.with_v && e.variant.float32_norm_weights == variant.float32_norm_weights &&
        same_positions) {
      targets::aot::EntryPoint rope = e;
      rope.variant = variant;  // implicit positions: the entry's id width is not the kernel's
      out.emplace_back(rope, symbols.rope);
    }
  }
  return out;
}

// Runs argv[0] from PATH with stdout and stderr going to `log`, in
// `work_dir` (private to this compile: a relative path the driver or linker
// looks up cannot find another user's file) with its temporary files there
// too; the exit status.
int run_program(const std::vector<std::string>& args, const std::string& log, const std::string& work_dir) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string tmpdir = "TMPDIR=" + work_dir;
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "TMPDIR=", 7) != 0) env.push_back(*e);
  env.push_back(const_cast<char*>(tmpdir.c_str()));
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addchdir_np(&actions, work_dir.c_str());
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -spawned;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -errno;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace

KernelSymbols kernel_symbols(const RopeSpec& spec, const CacheKey& key) {
  KernelSymbols s;
  s.prefix = "ropegen_" + key.hex + "_";
  s.rope = s.prefix + "rope";
  if (spec.has_pass_through()) s.pass_through = s.prefix + "pass_through";
  return s;
}

std::optional<Diagnostic> compile_runtime_object(const Halide::Target& target, const std::string& path) {
  try {
    return write_through_memory(path, [&](const std::string& memory) {
      Halide::compile_standalone_runtime(memory, target.without_feature(Halide::Target::NoRuntime));
    });
  } catch (const Halide::Error& e) {
    return named_error("kernel cache",
                       fmt::format("Halide cannot compile its runtime for {}: {}", target.to_string(), e.what()));
  }
}

Result<std::string> compile_shared_object(const RopeSpec& spec, const lowering::KernelVariant& variant,
                                          const Halide::Target& target, const KernelSymbols& symbols,
                                          const std::string& runtime_object, const std::string& work_dir) {
  std::vector<std::string> objects;
  try {
    // Every entry without a runtime; the runtime comes in once (as in rope-gen build).
    for (const auto& [entry, symbol] : entries_for(spec, variant, symbols)) {
      const std::string object = work_dir + "/" + symbol + ".o";
      const Halide::Module module =
          targets::aot::compile_entry(spec, entry, symbol, target.with_feature(Halide::Target::NoRuntime));
      if (auto e = write_through_memory(object, [&](const std::string& memory) {
            module.compile({{Halide::OutputFileType::object, memory}});
          }))
        return *e;
      objects.push_back(object);
    }
  } catch (const Halide::Error& e) {
    return named_error("kernel cache",
                       fmt::format("Halide cannot compile {} for {}: {}", spec.name, target.to_string(), e.what()));
  }
  objects.push_back(runtime_object);

  // Only the kernel is exported, and the runtime entries rope-gen calls
  // (its error and print handlers; its thread pool's shutdown, before a
  // fork, and size, for the kernel's pool_threads); the rest of the runtime
  // stays local.
  const std::string exports = work_dir + "/exports.map";
  if (!write_new_file(exports, "{\n  global: " + symbols.prefix +
                                   "*; halide_set_error_handler; halide_set_custom_print; halide_shutdown_thread_pool; "
                                   "halide_get_num_threads;\n  local: *;\n};\n"))
    return named_error("kernel cache", fmt::format("cannot write {}: {}", exports, std::strerror(errno)));
  const std::string output = work_dir + "/kernel.so", log = work_dir + "/link.log";
  const char* cxx = std::getenv("ROPEGEN_CXX");
  std::vector<std::string> args = {cxx && *cxx ? cxx : "c++", "-shared", "-o", output};
  args.insert(args.end(), objects.begin(), objects.end());
  args.insert(args.end(), {"-Wl,--version-script=" + exports, "-Wl,-z,noexecstack", "-Wl,--as-needed", "-lpthread",
                           "-ldl", "-lm"});
  const int status = run_program(args, log, work_dir);
  if (status < 0)
    return named_error("kernel cache",
                       fmt::format("cannot run the linker `{}`: {} (install a C++ compiler, or set ROPEGEN_CXX)",
                                   args[0], std::strerror(-status)));
  if (status != 0)
    return named_error("kernel cache", fmt::format("linking the kernel with `{}` failed (exit {}):\n{}", args[0],
                                                   status, read_text(log)));
  return output;
}

}  // namespace ropegen::runtime
