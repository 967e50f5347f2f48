// rope-gen build SPEC [--targets host,cuda,vulkan,...] [-o DIR]: an AOT library in DIR
// (default ./<name>): lib<name>.a, <name>.h, Halide's entry headers,
// HalideRuntime.h and manifest.json; a JSON summary on stdout.
// The files are built in a staging directory inside DIR and renamed into
// place, so a failed build leaves DIR as it was. DIR must be new, empty or
// an earlier build's (build_output_dir.h). Compiled entries are kept in the
// kernel cache (runtime/aot_memo.h): a build of the same spec and targets by
// the same rope-gen takes them from there instead of compiling them again.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/file_write.h"
#include "build_output_dir.h"
#include "cli_error.h"
#include "commands.h"
#include "ropegen/spec_io.h"
#include "runtime/aot_memo.h"
#include "targets/aot/build_library.h"

namespace ropegen::cli {
namespace {

namespace fs = std::filesystem;

struct BuildOptions {
  std::string spec, targets = "host", out;
};

// Removes, unless committed, the staging dir and any directories this run
// created to hold DIR, so a failure leaves no trace.
class Staging {
 public:
  explicit Staging(const fs::path& out) {
    std::error_code ec;
    for (fs::path p = out; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) created_top_ = p;
    if (fs::exists(out, ec) && !fs::is_directory(out, ec)) fail(fmt::format("-o {}: exists and is not a directory", out.string()));
    fs::create_directories(out, ec);
    if (ec) fail(fmt::format("cannot create {}: {}", out.string(), ec.message()));
    std::string tmpl = (out / ".rope-gen-build-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      if (!created_top_.empty()) fs::remove_all(created_top_, ec);
      fail(fmt::format("cannot create a directory in {}", out.string()));
    }
    dir_ = tmpl;
  }
  ~Staging() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (!committed_ && !created_top_.empty()) fs::remove_all(created_top_, ec);
  }
  const fs::path& dir() const { return dir_; }
  void commit() { committed_ = true; }

 private:
  fs::path dir_, created_top_;
  bool committed_ = false;
};

void run_build(const BuildOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const RopeSpec spec = unwrap(load_spec(o.spec));
  const targets::aot::AotTargets targets = unwrap(targets::aot::parse_aot_targets(o.targets));
  const fs::path out = o.out.empty() ? fs::path(spec.name) : fs::path(o.out);

  const BuildOutputDir out_dir(out);
  Staging staging(out);
  const std::unique_ptr<runtime::AotMemo> memo = runtime::open_aot_memo();
  const targets::aot::BuiltLibrary built =
      unwrap(targets::aot::build_aot_library(spec, targets, staging.dir(), memo.get()));
  const std::vector<std::string>& files = built.files;
  out_dir.check_replaceable(files);
  // manifest.json comes last in `files`: it appears once everything it lists is in place.
  for (const std::string& f : files) {
    if (const auto failure = base::publish_file(staging.dir() / f, out / f, {}))
      fail(fmt::format("cannot move {} into {}: {}", f, out.string(), failure->why));
  }
  staging.commit();

  nlohmann::ordered_json j;
  j["name"] = spec.name;
  j["spec_hash"] = spec_hash(spec);
  j["out"] = out.string();
  j["files"] = files;
  for (const auto& t : targets.all()) j["targets"].push_back(t.target.without_feature(Halide::Target::NoRuntime).to_string());
  // Entries (and Halide's runtime) compiled now, and taken from the kernel cache.
  j["compiled"] = built.compiled;
  j["reused"] = built.reused;
  j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << j.dump() << "\n";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

void add_build_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "build",
      "Compile SPEC ahead of time into DIR: lib<name>.a (every target: the CPU's picked at run time,\n"
      "CUDA/Vulkan for calls whose tensors are on that device), <name>.h (C99/C++, no Halide needed)\n"
      "and manifest.json. `rope-gen SPEC` is `rope-gen build SPEC`.");
  auto o = std::make_shared<BuildOptions>();
  cmd->add_option("SPEC", o->spec, "spec file (YAML)")->required();
  cmd->add_option("--targets", o->targets,
                  "comma-separated, one architecture; the last CPU target is the baseline, always usable.\n"
                  "host (default; on x86-64: avx512_zen4, avx512_skylake, avx2, sse41, x86-64) or Halide\n"
                  "targets, e.g. x86-64-linux-avx2-fma-f16c-sse41,x86-64-linux or arm-64-linux; plus\n"
                  "cuda (sm_80 PTX: A100 and newer, libcuda.so.1 loaded at run time) and/or vulkan\n"
                  "(libvulkan.so.1), e.g. host,cuda,vulkan; a CPU target is required. No GPU, driver\n"
                  "or CUDA toolkit is needed to build");
  cmd->add_option("-o,--out", o->out, "output directory (default: ./<name>): new, empty, or an earlier build's; only the library's files are replaced");
  cmd->callback([o] { run_build(*o); });
}

bool is_bare_spec_call(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return false;
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-') return false;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == first) return false;
  std::error_code ec;
  return ends_with(first, ".yaml") || ends_with(first, ".yml") || fs::is_regular_file(first, ec);
}

}  // namespace ropegen::cli
