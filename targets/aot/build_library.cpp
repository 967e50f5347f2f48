#include "build_library.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "targets/aot/ar_archive.h"
#include "targets/aot/embedded_files.h"
#include "targets/aot/generated_header.h"
#include "targets/aot/library.h"
#include "targets/aot/manifest.h"

namespace ropegen::targets::aot {
namespace {

namespace fs = std::filesystem;

Diagnostic error(const std::string& where, std::string message) { return Diagnostic{{where, -1, -1}, std::move(message), {}}; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<Diagnostic> write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return error(path.string(), "cannot write " + path.string());
  return std::nullopt;
}

// Compiles one entry point for every target into objects/ (the dispatcher
// and one object per target) and its Halide header into dir; returns the
// arguments Halide gave the function.
CompiledEntry compile_entry_for_targets(const RopeSpec& spec, const EntryPoint& entry,
                                        const std::vector<AotTarget>& targets, const fs::path& dir,
                                        const fs::path& objects) {
  std::vector<Halide::Target> halide_targets;
  std::vector<std::string> suffixes;
  for (const AotTarget& t : targets) halide_targets.push_back(t.target), suffixes.push_back(t.suffix);
  CompiledEntry compiled{entry, {}};
  auto factory = [&](const std::string& fn_name, const Halide::Target& target) {
    Halide::Module module = compile_entry(spec, entry, fn_name, target);
    if (compiled.arguments.empty())
      for (const auto& a : module.get_function_by_name(fn_name).args) compiled.arguments.push_back(a);
    return module;
  };
  Halide::compile_multitarget(entry.name,
                              {{Halide::OutputFileType::object, (objects / (entry.name + ".o")).string()},
                               {Halide::OutputFileType::c_header, (dir / entry_header_file(entry)).string()}},
                              halide_targets, suffixes, factory);
  return compiled;
}

// Halide names a header's include guard after the path it was written to,
// here the staging directory; name it after the entry instead.
std::optional<Diagnostic> fix_include_guard(const fs::path& header, const EntryPoint& entry) {
  std::string text = read_text(header);
  const std::string marker = "#ifndef ";
  if (text.compare(0, marker.size(), marker) != 0) return std::nullopt;
  const std::string guard = text.substr(marker.size(), text.find('\n') - marker.size());
  const std::string wanted = "HALIDE_ROPEGEN_" + entry.name + "_H";
  for (size_t at = text.find(guard); at != std::string::npos; at = text.find(guard, at + wanted.size()))
    text.replace(at, guard.size(), wanted);
  return write_text(header, text);
}

// rope-gen's embedded call library holds objects for the machine rope-gen
// runs on: they go into libraries for the same architecture and OS.
bool can_hold_call_library(const Halide::Target& runtime_target) {
  const Halide::Target host = Halide::get_host_target();
  return runtime_target.arch == host.arch && runtime_target.bits == host.bits && runtime_target.os == host.os;
}

// The call library's objects (ropegen_library_run and the checks behind it)
// into objects/, named apart from the kernels' objects.
std::optional<Diagnostic> extract_call_library(const fs::path& objects) {
  const std::string where = "rope-gen's embedded call library";
  Result<std::vector<ArchiveMember>> members =
      read_ar_archive(embedded::bytes(embedded::call_archive, embedded::call_archive_size), where);
  if (!members) {
    Diagnostic d = members.errors().front();
    d.message += " (rope-gen was built wrong; please report)";
    return d;
  }
  for (const ArchiveMember& m : *members)
    if (auto e = write_text(objects / ("ropegen_call_" + m.name), std::string(m.data))) return e;
  return std::nullopt;
}

std::vector<std::string> object_files(const fs::path& objects) {
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(objects))
    if (f.path().extension() == ".o") files.push_back(f.path().string());
  std::sort(files.begin(), files.end());  // a reproducible archive
  return files;
}

}  // namespace

Result<std::vector<std::string>> build_aot_library(const RopeSpec& spec, const std::vector<AotTarget>& targets,
                                                   const std::string& dir_name) {
  const fs::path dir(dir_name), objects = dir / "objects";
  std::error_code ec;
  fs::create_directory(objects, ec);
  if (ec) return error(objects.string(), "cannot create " + objects.string() + ": " + ec.message());

  LibraryDescription lib{spec, targets, runtime_target(targets), {}};
  std::vector<std::string> written;
  try {
    for (const EntryPoint& entry : entry_points(spec)) {
      lib.entries.push_back(compile_entry_for_targets(spec, entry, targets, dir, objects));
      if (auto e = fix_include_guard(dir / entry_header_file(entry), entry)) return *e;
      written.push_back(entry_header_file(entry));
    }
    // Every entry was built with no_runtime: the runtime goes in once.
    Halide::compile_standalone_runtime((objects / (spec.name + "_halide_runtime.o")).string(), lib.runtime_target);
    lib.has_call_library = can_hold_call_library(lib.runtime_target);
    if (lib.has_call_library)
      if (auto e = extract_call_library(objects)) return *e;
    Halide::create_static_library(object_files(objects), lib.runtime_target, (dir / library_file(spec)).string());
  } catch (const Halide::CompileError& e) {
    return error("--targets", fmt::format("Halide cannot compile {} for these targets: {}", spec.name, e.what()));
  }
  written.push_back(library_file(spec));
  fs::remove_all(objects, ec);

  // The caller compiles against the runtime header of the Halide that built the objects.
  fs::copy_file(ROPEGEN_HALIDE_RUNTIME_HEADER, dir / halide_runtime_header_file(), ec);
  if (ec)
    return error(ROPEGEN_HALIDE_RUNTIME_HEADER,
                 fmt::format("cannot copy Halide's runtime header {}: {}", ROPEGEN_HALIDE_RUNTIME_HEADER, ec.message()));
  written.push_back(halide_runtime_header_file());
  if (auto e = write_text(dir / c_header_file(),
                          std::string(embedded::bytes(embedded::ropegen_c_header, embedded::ropegen_c_header_size))))
    return *e;
  written.push_back(c_header_file());

  if (auto e = write_text(dir / header_file(spec), generated_header(lib))) return *e;
  written.push_back(header_file(spec));
  if (auto e = write_text(dir / manifest_file(), manifest_json(lib))) return *e;
  written.push_back(manifest_file());
  return written;
}

}  // namespace ropegen::targets::aot
