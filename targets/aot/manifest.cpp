#include "manifest.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
// and what the dims mean; symbolic extents: H heads of q, Hk of k, S
// tokens, B batch (1 for thd), N sequences, C copied dims.
void describe_buffer(const RopeSpec& spec, const std::string& name, ordered_json& j) {
  const int half = spec.num_pairs();
  const bool interleaved = spec.output_pairing == Pairing::Interleaved;
  const std::string heads = name.back() == 'k' ? "Hk" : "H";
  if (name == "q" || name == "k") {
    j["dims"] = {"d", "h", "s", "b"};
    j["shape"] = {spec.head_dim, heads, "S", "B"};
    j["note"] = "the whole head; dim d has stride 1";
  } else if (name == "out_q" || name == "out_k") {
    if (interleaved) {
      j["dims"] = {"m", "r", "h", "s", "b"};
      j["shape"] = {2, half, heads, "S", "B"};
      j["note"] = fmt::format("the rotary dims only, based at dim {}: member m of pair r; r has stride 2", spec.rotary_offset);
    } else {
      j["dims"] = {"r", "m", "h", "s", "b"};
      j["shape"] = {half, 2, heads, "S", "B"};
      j["note"] = fmt::format("the rotary dims only, based at dim {}: member m of pair r; m has stride {}",
                              spec.rotary_offset, half);
    }
  } else if (name == "positions" && spec.axes.enabled()) {
    j["dims"] = {"axis", "s", "b"};
    j["shape"] = {spec.axes.count(), "S", "B"};
    j["note"] = "position ids, one per axis; any strides (0 along b shares ids across the batch)";
  } else if (name == "positions") {
    j["dims"] = {"s", "b"};
    j["shape"] = {"S", "B"};
    j["note"] = "position ids; any strides (0 along b shares ids across the batch)";
  } else if (name == "x" || name == "out_x") {
    const bool alibi = spec.encoding == Encoding::Alibi;
    j["dims"] = alibi ? ordered_json{"key", "h", "query", "b"} : ordered_json{"d", "h", "s", "b"};
    j["shape"] = alibi ? ordered_json{"Sk", spec.num_heads, "Sq", "B"} : ordered_json{spec.dim, 1, "S", "B"};
    j["note"] = alibi ? "attention scores [B, H, Sq, Sk]; the key dim has stride 1" : "rows of x; dim d has stride 1";
  } else if (name == "table") {
    j["dims"] = {"d", "position"};
    j["shape"] = {spec.dim, "max_len"};
    j["note"] = "the learned position table [max_len, dim]";
  } else if (name == "cos_sin_cache") {
    j["dims"] = {"c", "position"};
    j["shape"] = {spec.rotary_dim, "max_pos"};
    j["note"] = "float32 [max_pos, rotary_dim]: cos of each pair, then its sin, per position; c has stride 1";
  } else if (name == "freqs" || name == "d_freqs") {
    j["dims"] = {"r"};
    j["shape"] = {half};
    j["note"] = name == "freqs" ? "inv_freq of each pair, given per call" : "dL/d(inv_freq)";
  } else if (name == "saved_q" || name == "saved_k") {
    j["dims"] = {"d", "h", "s", "b"};
    j["shape"] = {spec.head_dim, heads, "S", "B"};
    j["note"] = "the forward's input, for dL/d(inv_freq)";
  } else if (name == "cu_seqlens") {
    j["dims"] = {"n"};
    j["shape"] = {"N+1"};
    j["note"] = "thd: sequence starts, 0 .. T";
  } else if (name == "pass_in" || name == "pass_out") {
    j["dims"] = {"d", "h", "s", "b"};
    j["shape"] = {"C", "H", "S", "B"};
    j["note"] = "one range of dims outside the rotary part, based at its first dim";
  } else if (name == "v") {
    j["dims"] = {"d", "h", "s", "b"};
    j["shape"] = {"Dv", "Hk", "T", 1};
    j["note"] = "values [T, Hk, Dv], copied into v_cache";
  } else if (name == "k_cache" || name == "v_cache") {
    j["dims"] = {"d", "h", "entry", "page"};
    j["shape"] = {name == "k_cache" ? ordered_json(spec.head_dim) : ordered_json("Dv"), "Hk",
                  spec.kv_cache.page_size, spec.kv_cache.layout == KvLayout::Contiguous ? "num_slots" : "pages"};
    j["note"] = spec.kv_cache.is_fp8() ? fmt::format("the cache, updated at the tokens' entries; uint8 {} codes of "
                                                     "x / scale",
                                                     to_string(spec.kv_cache.dtype))
                                       : std::string("the cache, updated at the tokens' entries");
  } else if (name == "kv_indices" || name == "kv_indptr" || name == "batch_indices" || name == "slot_mapping" ||
             name == "cache_positions") {
    j["dims"] = {"i"};
    j["shape"] = {name == "kv_indptr" ? "B+1" : name == "kv_indices" ? "num_page_refs" : "T"};
    j["note"] = name == "cache_positions" ? "int32: each token's position in its request's pages (the call's "
                                            "cache_positions, else its positions)"
                                          : "int32 cache indices";
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
