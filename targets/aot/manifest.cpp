#include "manifest.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "abi/arguments.h"
#include "abi/kernel_abi.h"
#include "ropegen/spec_io.h"
#include "targets/aot/generated_header.h"

namespace ropegen::targets::aot {
namespace {

using nlohmann::ordered_json;

std::string type_name(const Halide::Type& t) {
  const char* code = t.is_bfloat() ? "bfloat" : t.is_float() ? "float" : t.is_uint() ? "uint" : "int";
  return fmt::format("{}{}", code, t.bits());
}

const char* kind_name(const Halide::Argument& a) {
  if (a.is_scalar()) return "scalar";
  return a.is_input() ? "input_buffer" : "output_buffer";
}

// Dim names and extents (numbers where the spec fixes them) of each buffer,
// by its row of the argument table (abi/arguments.h): its shape rule, its
// extent's name, its doc. Symbolic extents: H heads of q, Hk of k, S
// tokens, B batch (1 for thd), N sequences, C copied dims.
void describe_buffer(const RopeSpec& spec, const std::string& name, ordered_json& j) {
  const int half = spec.num_pairs();
  if (name == "pass_in" || name == "pass_out") {
    j["dims"] = {"d", "h", "s", "b"};
    j["shape"] = {"C", "H", "S", "B"};
    j["note"] = "one range of dims outside the rotary part, based at its first dim";
    return;
  }
  const std::optional<abi::Arg> arg = abi::argument_named(name);
  if (!arg) return;
  const abi::ArgumentInfo& a = abi::info(*arg);
  const bool alibi = spec.encoding == Encoding::Alibi, rope = spec.encoding == Encoding::Rope;
  const std::string heads =
      *arg == abi::Arg::K || *arg == abi::Arg::OutK || *arg == abi::Arg::SavedK || *arg == abi::Arg::V ? "Hk" : "H";
  auto extent = [&](const char* e) {
    const std::string name = e;
    return name == "pairs" ? ordered_json(half) : name == "head_dim" ? ordered_json(spec.head_dim) : ordered_json(e);
  };
  j["note"] = a.doc;
  switch (a.shape) {
    case abi::ShapeRule::Layout:
      if (rope && a.direction == abi::Direction::Out && !spec.qk_norm.enabled) {
        // The rotary dims only, as the kernel writes them (abi::rotary_view;
        // qk_norm kernels write whole rows).
        const abi::RotaryView v = abi::rotary_view(spec.output_pairing, spec.rotary_dim);
        j["dims"] = v.pairs_first ? ordered_json{"r", "m", "h", "s", "b"} : ordered_json{"m", "r", "h", "s", "b"};
        j["shape"] = {v.extent0, v.extent1, heads, "S", "B"};
        j["note"] = fmt::format("the rotary dims only, based at dim {}: member m of pair r; {} has stride {}",
                                spec.rotary_offset, v.pairs_first ? "m" : "r", v.stride1);
      } else if (alibi) {
        j["dims"] = {"key", "h", "query", "b"};
        j["shape"] = {"Sk", spec.num_heads, "Sq", "B"};
      } else if (*arg == abi::Arg::V) {
        j["dims"] = {"d", "h", "s", "b"};
        j["shape"] = {"Dv", "Hk", "T", 1};
      } else {
        j["dims"] = {"d", "h", "s", "b"};
        j["shape"] = {rope ? spec.head_dim : spec.dim, rope ? ordered_json(heads) : ordered_json(1), "S", "B"};
      }
      break;
    case abi::ShapeRule::TokenIds:
      j["dims"] = spec.axes.enabled() ? ordered_json{"axis", "s", "b"} : ordered_json{"s", "b"};
      j["shape"] = spec.axes.enabled() ? ordered_json{spec.axes.count(), "S", "B"} : ordered_json{"S", "B"};
      break;
    case abi::ShapeRule::Vector:
      j["dims"] = {"i"};
      j["shape"] = {extent(a.extent)};
      break;
    case abi::ShapeRule::RowTable:
      j["dims"] = {"column", "row"};
      j["shape"] = {rope ? spec.rotary_dim : spec.dim, a.extent};
      break;
    case abi::ShapeRule::KvCache:
      j["dims"] = {"d", "h", "entry", "page"};
      j["shape"] = {*arg == abi::Arg::KCache ? ordered_json(spec.head_dim) : ordered_json("Dv"), "Hk",
                    spec.kv_cache.page_size, spec.kv_cache.layout == KvLayout::Contiguous ? "num_slots" : "pages"};
      if (spec.kv_cache.is_fp8())
        j["note"] = fmt::format("{}; uint8 {} codes of x / scale", a.doc, to_string(spec.kv_cache.dtype));
      break;
    case abi::ShapeRule::Scalar: break;
  }
}

ordered_json describe_entry(const LibraryDescription& lib, const CompiledEntry& e) {
  const RopeSpec& spec = lib.spec;
  ordered_json j;
  j["name"] = e.entry.name;
  // The C functions per device: Halide's <fn>, <fn>_argv, <fn>_metadata;
  // a GPU one takes `void *__user_context` before the arguments below.
  ordered_json functions;
  functions["cpu"] = e.entry.name;
  for (const AotTarget& g : lib.targets.gpu) functions[to_string(g.device)] = entry_function(e.entry, g);
  j["functions"] = functions;
  // After the first call: whether the CUDA function only launches kernels
  // (else it copies a host-computed table to the device at every call).
  if (lib.targets.for_device(DeviceType::CUDA)) j["cuda_graph_capturable"] = !e.cuda_copies_per_call;
  if (e.entry.kind == EntryPoint::Kind::PassThrough) {
    j["role"] = "copy the dims outside the rotary part (out-of-place calls on a partial-rotary spec)";
  } else {
    if (spec.encoding != Encoding::Rope) j["role"] = fmt::format("apply the {} encoding", to_string(spec.encoding));
    else if (spec.kv_cache.enabled)
      j["role"] = std::string("rotate q, append rotated k") + (e.entry.variant.with_v ? " and v" : "") +
                  " to the caches" + (e.entry.variant.with_k ? ", write rotated k to out_k" : "");
    else j["role"] = std::string(e.entry.variant.backward ? "gradients of " : "") + (e.entry.variant.with_k ? "rotate q and k" : "rotate q");
    if (e.entry.explicit_positions) j["position_type"] = type_name(lowering::position_type(e.entry.variant));
  }
  ordered_json args = ordered_json::array();
  for (const auto& a : e.arguments) {
    ordered_json arg;
    // Halide may make an output buffer's name unique with a `$n` tail; the role is the name.
    const std::string name = a.name.substr(0, a.name.find('$'));
    arg["name"] = name;
    arg["kind"] = kind_name(a);
    arg["type"] = type_name(a.type);
    if (a.is_buffer()) {
      arg["dimensions"] = a.dimensions;
      describe_buffer(lowering::kernel_spec(spec, e.entry.variant), name, arg);  // backward: written in `pairing`
    }
    if (name == "pool_threads")
      arg["note"] = "the library runtime's halide_get_num_threads() (at least 1; <name>_run passes it): the size of "
                    "the parallel tasks follows it, the results do not";
    else if (const std::optional<abi::Arg> a = abi::argument_named(name); a && !abi::is_tensor(*a))
      arg["note"] = abi::info(*a).doc;
    args.push_back(arg);
  }
  j["arguments"] = args;
  return j;
}

}  // namespace

std::string manifest_json(const LibraryDescription& lib) {
  const RopeSpec& spec = lib.spec;
  ordered_json j;
  j["format"] = "rope-gen-aot-library/1";
  j["name"] = spec.name;
  j["spec_hash"] = spec_hash(spec);
  j["spec"] = to_yaml(spec);
  j["halide_version"] = fmt::format("{}.{}.{}", HALIDE_VERSION_MAJOR, HALIDE_VERSION_MINOR, HALIDE_VERSION_PATCH);
  j["architecture"] = architecture_name(lib.runtime_target);
  ordered_json targets = ordered_json::array();
  for (size_t i = 0; i < lib.targets.cpu.size(); ++i) {
    const bool baseline = i + 1 == lib.targets.cpu.size();
    targets.push_back({{"target", lib.targets.cpu[i].target.without_feature(Halide::Target::NoRuntime).to_string()},
                       {"suffix", lib.targets.cpu[i].suffix},
                       {"device", "cpu"},
                       {"role", baseline ? "baseline" : "used when the CPU has its features"}});
  }
  for (const AotTarget& g : lib.targets.gpu) {
    ordered_json t = {{"target", g.target.without_feature(Halide::Target::NoRuntime).to_string()},
                      {"suffix", g.suffix},
                      {"device", to_string(g.device)},
                      {"role", fmt::format("calls whose tensors are on {} devices (functions <entry>_{})",
                                           to_string(g.device), g.suffix)}};
    t["user_context"] = "its functions take `void *__user_context` before the arguments listed: what <name>_run "
                        "passes (the call's device and stream)";
    if (g.device == DeviceType::CUDA) {
      const int sm = g.target.get_cuda_capability_lower_bound();
      t["ptx"] = fmt::format("sm_{}", sm);
      t["runs_on"] = fmt::format("CUDA devices of capability sm_{} and newer (the driver JIT-compiles the PTX at the "
                                 "first call on each device)",
                                 sm);
      t["driver"] = "libcuda.so.1, loaded at run time (dlopen)";
      t["context"] = "the device's primary context; kernels on ropegen_call.stream (NULL: the legacy default stream)";
    } else {
      t["runs_on"] = "vulkan:0, the device Halide's runtime picks (HL_VK_DEVICE_TYPE); buffers it allocated";
      t["driver"] = "libvulkan.so.1, loaded at run time (dlopen)";
    }
    targets.push_back(t);
  }
  j["targets"] = targets;
  ordered_json devices = ordered_json::array({"cpu"});
  for (const AotTarget& g : lib.targets.gpu) devices.push_back(to_string(g.device));
  j["devices"] = devices;
  j["runtime_target"] = lib.runtime_target.to_string();
  ordered_json headers = ordered_json::array();
  for (const auto& e : lib.entries) headers.push_back(entry_header_file(e.entry));
  j["files"] = {{"library", library_file(spec)},
                {"header", header_file(spec)},
                {"c_header", c_header_file()},
                {"aot_header", aot_header_file()},
                {"halide_runtime_header", halide_runtime_header_file()},
                {"entry_headers", headers}};
  j["link"] = link_libraries();
  j["tensor"] = {{"layout", to_string(spec.layout)},
                 {"dtype", to_string(spec.dtype)},
                 {"element", spec.dtype == DType::F32 ? "float" : "uint16_t bit pattern"},
                 {"head_dim", spec.head_dim},
                 {"rotary_dim", spec.rotary_dim},
                 {"rotary_offset", spec.rotary_offset},
                 {"pairing", to_string(spec.pairing)},
                 {"output_pairing", to_string(spec.output_pairing)},
                 {"in_place", spec.output_pairing == spec.pairing},
                 {"positions", to_string(spec.positions)}};
  j["c_entry"] = {
      {"function", run_function(spec)},
      {"declaration", fmt::format("int {}(const ropegen_call *call, ropegen_message *message);", run_function(spec))},
      {"header", header_file(spec)},
      {"calls", "ropegen_library_run"},
      {"in_library", lib.has_call_library},
      {"note", lib.has_call_library
                   ? "ropegen_library_run is in the archive"
                   : "ropegen_library_run is not in this cross-compiled archive: link rope-gen's call/ library "
                     "(libropegen_call.a) built for its architecture"}};
  ordered_json entries = ordered_json::array();
  for (const auto& e : lib.entries) entries.push_back(describe_entry(lib, e));
  j["entry_points"] = entries;
  return j.dump(2) + "\n";
}

}  // namespace ropegen::targets::aot
