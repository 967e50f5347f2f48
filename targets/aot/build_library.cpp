#include "build_library.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ropegen/spec_io.h"
#include "targets/aot/ar_archive.h"
#include "targets/aot/embedded_files.h"
#include "targets/aot/generated_header.h"
#include "targets/aot/library.h"
#include "targets/aot/manifest.h"
#include "targets/aot/object_memo.h"

namespace ropegen::targets::aot {
namespace {

namespace fs = std::filesystem;

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
  if (!out) return named_error(path.string(), "cannot write " + path.string());
  return std::nullopt;
}

// Whether a GPU pipeline computes a stage on the host and copies it to the
// device at every call, read from its lowered code: a buffer of its own
// with both a host and a device side (halide_device_and_host_malloc).
// Device-only scratch (halide_device_malloc) is not a copy: Halide's CUDA
// runtime keeps freed device memory for reuse (per context and stream), so
// after the first call it allocates nothing (tests/aot: the stub driver).
bool copies_host_stages_to_the_device(const Halide::Module& module) {
  struct Finder : Halide::Internal::IRVisitor {
    using IRVisitor::visit;
    void visit(const Halide::Internal::Call* call) override {
      found = found || call->name == "halide_device_and_host_malloc";
      IRVisitor::visit(call);
    }
    bool found = false;
  } finder;
  for (const Halide::Internal::LoweredFunc& f : module.functions()) f.body.accept(&finder);
  return finder.found;
}

// Compiles one entry point for every CPU target into objects/ (the
// dispatcher and one object per target) and its Halide header into dir,
// then for each GPU target into objects/<name>_<suffix>.o (its PTX or
// SPIR-V embedded by Halide); returns the arguments Halide gave the CPU
// function.
CompiledEntry compile_entry_for_targets(const RopeSpec& spec, const EntryPoint& entry, const AotTargets& targets,
                                        const fs::path& dir, const fs::path& objects) {
  std::vector<Halide::Target> halide_targets;
  std::vector<std::string> suffixes;
  for (const AotTarget& t : targets.cpu) halide_targets.push_back(t.target), suffixes.push_back(t.suffix);
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
  for (const AotTarget& gpu : targets.gpu) {
    const std::string fn = entry_function(entry, gpu);
    Halide::Module module = compile_entry(spec, entry, fn, gpu.target);
    if (gpu.device == DeviceType::CUDA) compiled.cuda_copies_per_call = copies_host_stages_to_the_device(module);
    module.compile({{Halide::OutputFileType::object, (objects / (fn + ".o")).string()}});
  }
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

// The members of an archive rope-gen embeds into objects/, each named
// `prefix` + its name, apart from the kernels' objects; `wanted` picks them.
template <typename Wanted>
std::optional<Diagnostic> extract_archive(std::string_view archive, const std::string& where, const fs::path& objects,
                                          const std::string& prefix, Wanted wanted) {
  Result<std::vector<ArchiveMember>> members = read_ar_archive(archive, where);
  if (!members) {
    Diagnostic d = members.errors().front();
    d.message += " (rope-gen was built wrong; please report)";
    return d;
  }
  for (const ArchiveMember& m : *members)
    if (wanted(m.name))
      if (auto e = write_text(objects / (prefix + m.name), std::string(m.data))) return e;
  return std::nullopt;
}

// The call library's objects (ropegen_library_run and the checks behind
// it) and, for a library with GPU targets, the runtime hooks of each
// (device_hooks/: cuda_hooks.cpp.o, vulkan_hooks.cpp.o).
std::optional<Diagnostic> extract_call_library(const LibraryDescription& lib, const fs::path& objects) {
  if (auto e = extract_archive(embedded::bytes(embedded::call_archive, embedded::call_archive_size),
                               "rope-gen's embedded call library", objects, "ropegen_call_",
                               [](const std::string&) { return true; }))
    return e;
  return extract_archive(embedded::bytes(embedded::device_hooks_archive, embedded::device_hooks_archive_size),
                         "rope-gen's embedded device hooks", objects, "ropegen_", [&](const std::string& name) {
                           for (const AotTarget& g : lib.targets.gpu)
                             if (name.rfind(g.suffix + "_hooks", 0) == 0) return true;
                           return false;
                         });
}

std::vector<std::string> object_files(const fs::path& objects) {
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(objects))
    if (f.path().extension() == ".o") files.push_back(f.path().string());
  std::sort(files.begin(), files.end());  // a reproducible archive
  return files;
}

// What an entry's compile depends on in the spec and the targets; the memo
// adds rope-gen's sources and Halide's version.
std::string entry_memo_key(const RopeSpec& spec, const EntryPoint& entry, const AotTargets& targets) {
  std::string what = fmt::format("aot-entry {}\nspec {} {}\n", entry.name, spec_hash(spec), spec.name);
  for (const AotTarget& t : targets.all()) what += fmt::format("target {} {}\n", t.suffix, t.target.to_string());
  return what;
}

// What the header and manifest need of a compiled entry besides its
// objects, kept beside them in the memo: Halide's arguments and what was
// read from its CUDA code.
constexpr const char* kEntryRecord = "entry.record";

std::string entry_record(const CompiledEntry& e) {
  std::string text = fmt::format("cuda_copies_per_call {}\n", e.cuda_copies_per_call ? 1 : 0);
  for (const Halide::Argument& a : e.arguments)
    text += fmt::format("argument {} {} {} {} {} {}\n", static_cast<int>(a.kind), static_cast<int>(a.type.code()),
                        a.type.bits(), a.type.lanes(), a.dimensions, a.name);
  return text;
}

std::optional<CompiledEntry> read_entry_record(const EntryPoint& entry, const std::string& text) {
  CompiledEntry compiled{entry, {}};
  std::istringstream lines(text);
  std::string field;
  int copies = -1;
  if (!(lines >> field >> copies) || field != "cuda_copies_per_call" || (copies != 0 && copies != 1))
    return std::nullopt;
  compiled.cuda_copies_per_call = copies == 1;
  int kind, code, bits, lanes, dimensions;
  std::string name;
  while (lines >> field >> kind >> code >> bits >> lanes >> dimensions >> name) {
    if (field != "argument" || kind < 0 || kind > 2 || code < 0 || code > 4 || bits <= 0 || bits > 64 || lanes != 1 ||
        dimensions < 0 || dimensions > 16)
      return std::nullopt;
    compiled.arguments.emplace_back(name, static_cast<Halide::Argument::Kind>(kind),
                                    Halide::Type(static_cast<halide_type_code_t>(code), bits, lanes), dimensions,
                                    Halide::ArgumentEstimates{});
  }
  if (!lines.eof() || compiled.arguments.empty()) return std::nullopt;
  return compiled;
}

std::set<std::string> file_names(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& f : fs::directory_iterator(dir)) names.insert(f.path().filename().string());
  return names;
}

// One entry's objects (into `objects`) and Halide header (into `dir`):
// from the memo when it has them, else compiled and then kept there.
Result<CompiledEntry> entry_objects(const RopeSpec& spec, const EntryPoint& entry, const AotTargets& targets,
                                    const fs::path& dir, const fs::path& objects, ObjectMemo* memo,
                                    BuiltLibrary& built) {
  const std::string what = memo ? entry_memo_key(spec, entry, targets) : std::string();
  const std::string header = entry_header_file(entry);
  if (memo)
    if (std::optional<MemoFiles> kept = memo->find(what)) {
      std::optional<CompiledEntry> compiled;
      for (const MemoFile& f : *kept)
        if (f.name == kEntryRecord) compiled = read_entry_record(entry, f.bytes);
      if (compiled) {
        for (const MemoFile& f : *kept) {
          if (f.name == kEntryRecord) continue;
          if (auto e = write_text((f.name == header ? dir : objects) / f.name, f.bytes)) return *e;
        }
        ++built.reused;
        return *compiled;
      }
    }
  const std::set<std::string> before = file_names(objects);
  CompiledEntry compiled = compile_entry_for_targets(spec, entry, targets, dir, objects);
  if (auto e = fix_include_guard(dir / header, entry)) return *e;
  ++built.compiled;
  if (memo) {
    MemoFiles files{{kEntryRecord, entry_record(compiled)}, {header, read_text(dir / header)}};
    for (const std::string& name : file_names(objects))
      if (!before.count(name)) files.push_back({name, read_text(objects / name)});
    memo->keep(what, files);
  }
  return compiled;
}

// Halide's runtime for the library (with every GPU API's support), from the memo or compiled.
std::optional<Diagnostic> runtime_object(const Halide::Target& target, const fs::path& object, ObjectMemo* memo,
                                         BuiltLibrary& built) {
  const std::string what = fmt::format("aot-runtime\ntarget {}\n", target.to_string());
  constexpr const char* kName = "halide_runtime.o";
  if (memo)
    if (std::optional<MemoFiles> kept = memo->find(what); kept && kept->size() == 1 && kept->front().name == kName) {
      ++built.reused;
      return write_text(object, kept->front().bytes);
    }
  Halide::compile_standalone_runtime(object.string(), target);
  ++built.compiled;
  if (memo) memo->keep(what, {{kName, read_text(object)}});
  return std::nullopt;
}

}  // namespace

Result<BuiltLibrary> build_aot_library(const RopeSpec& spec, const AotTargets& targets, const std::string& dir_name,
                                       ObjectMemo* memo) {
  const fs::path dir(dir_name), objects = dir / "objects";
  std::error_code ec;
  fs::create_directory(objects, ec);
  if (ec) return named_error(objects.string(), "cannot create " + objects.string() + ": " + ec.message());

  LibraryDescription lib{spec, targets, runtime_target(targets), {}};
  lib.has_call_library = can_hold_call_library(lib.runtime_target);
  if (!lib.has_call_library && !targets.gpu.empty())
    return named_error(
        "--targets", fmt::format("GPU targets need rope-gen's call library and device hooks in the "
                                 "archive, which rope-gen carries for {} only; build this library with "
                                 "CPU targets alone, or run rope-gen on a {} machine",
                                 architecture_name(Halide::get_host_target()), architecture_name(lib.runtime_target)));
  BuiltLibrary built;
  std::vector<std::string>& written = built.files;
  try {
    for (const EntryPoint& entry : entry_points(spec)) {
      Result<CompiledEntry> compiled = entry_objects(spec, entry, targets, dir, objects, memo, built);
      if (!compiled) return compiled.errors();
      lib.entries.push_back(std::move(compiled).value());
      written.push_back(entry_header_file(entry));
    }
    // Every entry was built with no_runtime: the runtime goes in once.
    if (auto e = runtime_object(lib.runtime_target, objects / (spec.name + "_halide_runtime.o"), memo, built))
      return *e;
    if (lib.has_call_library)
      if (auto e = extract_call_library(lib, objects)) return *e;
    Halide::create_static_library(object_files(objects), lib.runtime_target, (dir / library_file(spec)).string());
  } catch (const Halide::CompileError& e) {
    return named_error("--targets", fmt::format("Halide cannot compile {} for these targets: {}", spec.name, e.what()));
  }
  written.push_back(library_file(spec));
  fs::remove_all(objects, ec);

  // The caller compiles against the runtime header of the Halide that built the objects.
  fs::copy_file(ROPEGEN_HALIDE_RUNTIME_HEADER, dir / halide_runtime_header_file(), ec);
  if (ec)
    return named_error(ROPEGEN_HALIDE_RUNTIME_HEADER, fmt::format("cannot copy Halide's runtime header {}: {}",
                                                                  ROPEGEN_HALIDE_RUNTIME_HEADER, ec.message()));
  written.push_back(halide_runtime_header_file());
  struct FixedHeader {
    const char* file;
    std::string_view text;
  };
  for (const FixedHeader& h :
       {FixedHeader{c_header_file(), embedded::bytes(embedded::ropegen_c_header, embedded::ropegen_c_header_size)},
        FixedHeader{aot_header_file(), embedded::bytes(embedded::ropegen_aot_header, embedded::ropegen_aot_header_size)}}) {
    if (auto e = write_text(dir / h.file, std::string(h.text))) return *e;
    written.push_back(h.file);
  }

  if (auto e = write_text(dir / header_file(spec), generated_header(lib))) return *e;
  written.push_back(header_file(spec));
  if (auto e = write_text(dir / manifest_file(), manifest_json(lib))) return *e;
  written.push_back(manifest_file());
  return built;
}

}  // namespace ropegen::targets::aot
