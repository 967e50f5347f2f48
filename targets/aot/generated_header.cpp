#include "generated_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "abi/arguments.h"
#include "abi/kernel_abi.h"
#include "call/contract.h"
#include "ropegen/spec_io.h"

namespace ropegen::targets::aot {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// ropegen_aot.h's ropegen_contract, field by field, as a C initializer.
static_assert(sizeof(ropegen_contract) == 21 * 4, "ropegen_contract changed: update contract_initializer");
std::string contract_initializer(const ropegen_contract& c) {
  return fmt::format(
      "{{\n"
      "    {} /* encoding */, {} /* layout */, {{{}, {}, {}}} /* dtype: code, bits, lanes */,\n"
      "    {} /* row_dim */, {} /* num_heads */, {} /* rotary_offset */, {} /* rotary_dim */,\n"
      "    {} /* pairing */, {} /* output_pairing */, {} /* explicit_positions */,\n"
      "    {} /* position_axes */, {} /* runtime_frequencies */, {} /* table_frequencies */,\n"
      "    {} /* kv_layout */, {} /* kv_page_size */, {{{}, {}, {}}} /* kv_dtype: code, bits, lanes */,\n"
      "    {} /* kv_fp8 */, {} /* qk_norm */, {} /* qk_norm_weight */, {} /* output_fp8 */,\n"
      "    {} /* output_quant_group */\n"
      "  }}",
      c.encoding, c.layout, c.dtype.code, c.dtype.bits, c.dtype.lanes, c.row_dim, c.num_heads, c.rotary_offset,
      c.rotary_dim, c.pairing, c.output_pairing, c.explicit_positions, c.position_axes, c.runtime_frequencies,
      c.table_frequencies, c.kv_layout, c.kv_page_size, c.kv_dtype.code, c.kv_dtype.bits, c.kv_dtype.lanes, c.kv_fp8,
      c.qk_norm, c.qk_norm_weight, c.output_fp8, c.output_quant_group);
}

// The shape of q (x, the scores) in the spec's layout; `row`: another last dim.
std::string tensor_shape(const RopeSpec& spec, const char* heads = "H", std::optional<int> row = std::nullopt) {
  if (spec.encoding == Encoding::Alibi) return fmt::format("[B, {}, Sq, Sk]", spec.num_heads);
  const abi::LayoutTraits& t = abi::layout_traits(spec.layout);
  std::vector<std::string> dims(t.rank);
  dims[t.d] = std::to_string(row ? *row : spec.encoding == Encoding::Rope ? spec.head_dim : spec.dim);
  dims[t.s] = t.packed() ? "T" : "S";
  if (t.h >= 0) dims[t.h] = heads;
  if (!t.packed()) dims[t.b] = "B";
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

bool packed(const RopeSpec& spec) { return abi::layout_traits(spec.layout).packed(); }

std::string token_dims(const RopeSpec& spec) {
  const abi::LayoutTraits& t = abi::layout_traits(spec.layout);
  if (t.packed()) return "[T]";
  return t.s < t.b ? "[S, B] (or [S] shared by the batch)" : "[B, S] (or [S] shared by the batch)";
}

const char* element(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16 (uint16_t bit patterns)";
    case DType::BF16: return "bfloat16 (uint16_t bit patterns)";
  }
  return "?";
}

// Whether a call of this spec takes an argument: its feature (abi/arguments.h).
bool takes(const RopeSpec& spec, abi::Feature feature) {
  const bool rope = spec.encoding == Encoding::Rope;
  const KvCache& kv = spec.kv_cache;
  switch (feature) {
    case abi::Feature::Always: return true;
    case abi::Feature::Rope: return rope;
    case abi::Feature::ExplicitPositions:
      return spec.encoding != Encoding::Alibi && spec.positions == PositionsMode::Explicit;
    case abi::Feature::PackedLayout: return packed(spec);
    case abi::Feature::LearnedTable: return spec.encoding == Encoding::Learned;
    case abi::Feature::RuntimeFrequencies:
    case abi::Feature::FrequencyGradient: return rope && spec.frequency.scheme == FrequencyScheme::Runtime;
    case abi::Feature::SavedInputs:
      return rope && (spec.frequency.scheme == FrequencyScheme::Runtime || spec.qk_norm.enabled);
    case abi::Feature::TableFrequencies: return rope && spec.frequency.scheme == FrequencyScheme::Table;
    case abi::Feature::KvCache: return rope && kv.enabled;
    case abi::Feature::PagedKvCache: return rope && kv.enabled && kv.layout != KvLayout::Contiguous;
    case abi::Feature::ContiguousKvCache: return rope && kv.enabled && kv.layout == KvLayout::Contiguous;
    case abi::Feature::Fp8KvCache: return rope && kv.enabled && kv.is_fp8();
    case abi::Feature::Fp8Output: return spec.has_fp8_output();
    case abi::Feature::Fp8KCodes: return rope && ((kv.enabled && kv.is_fp8()) || spec.has_fp8_output());
    case abi::Feature::OutputQuant: return rope && spec.output_quant.enabled;
    case abi::Feature::SequenceLength:
      return rope && (spec.xpos.enabled || spec.scaling.type == ScalingType::Dynamic ||
                      (spec.scaling.type == ScalingType::LongRope && spec.scaling.policy == LongRopePolicy::PerCall));
    case abi::Feature::QkNormWeight:
    case abi::Feature::QkNormGradient: return rope && spec.qk_norm.has_weight();
    case abi::Feature::CpuSchedule: return false;  // not a field of the call
  }
  return false;
}

// A tensor argument's shape and dtype for this spec, as a call passes it.
std::string shape_and_dtype(const RopeSpec& spec, const abi::ArgumentInfo& a) {
  const bool rope = spec.encoding == Encoding::Rope;
  const KvCache& kv = spec.kv_cache;
  const bool key = a.arg == abi::Arg::K || a.arg == abi::Arg::OutK || a.arg == abi::Arg::SavedK;
  std::string shape;
  switch (a.shape) {
    case abi::ShapeRule::Layout:
      shape = a.arg == abi::Arg::V           ? std::string("[T, Hk, Dv]")
              : a.arg == abi::Arg::OutScales ? tensor_shape(spec, "H", spec.head_dim / spec.output_quant.group)
                                             : tensor_shape(spec, key ? "Hk" : "H");
      break;
    case abi::ShapeRule::TokenIds:
      shape = token_dims(spec) +
              (spec.axes.enabled() ? fmt::format(" plus a trailing [{}] (one id per axis)", spec.axes.count()) : "");
      break;
    case abi::ShapeRule::Vector:
      shape = std::string(a.extent) == "pairs"      ? fmt::format("[{}]", spec.num_pairs())
              : std::string(a.extent) == "head_dim" ? fmt::format("[{}]", spec.head_dim)
                                                    : fmt::format("[{}]", a.extent);
      break;
    case abi::ShapeRule::RowTable: shape = fmt::format("[{}, {}]", a.extent, rope ? spec.rotary_dim : spec.dim); break;
    case abi::ShapeRule::KvCache: {
      const std::string d = a.arg == abi::Arg::KCache ? std::to_string(spec.head_dim) : "Dv";
      shape = kv.layout == KvLayout::PagedNhd   ? fmt::format("[pages, {}, Hk, {}]", kv.page_size, d)
              : kv.layout == KvLayout::PagedHnd ? fmt::format("[pages, Hk, {}, {}]", kv.page_size, d)
                                                : fmt::format("[num_slots, Hk, {}]", d);
      break;
    }
    case abi::ShapeRule::Scalar: return "";
  }
  switch (a.dtype) {
    case abi::DtypeRule::Spec: return shape + " " + element(spec.dtype);
    case abi::DtypeRule::Output:
      return shape + " " +
             (spec.has_fp8_output() ? fmt::format("uint8 ({} codes)", to_string(spec.output_dtype))
                                    : element(spec.dtype));
    case abi::DtypeRule::SpecOrFloat32:
      return shape + " " + element(spec.dtype) + (spec.dtype == DType::F32 ? "" : " or float32");
    case abi::DtypeRule::Float32: return shape + " float32";
    case abi::DtypeRule::Ids: return shape + " int32 or int64";
    case abi::DtypeRule::Int32: return shape + " int32";
    case abi::DtypeRule::KvCache:
      return shape + " " + (kv.is_fp8() ? fmt::format("uint8 ({} codes)", to_string(kv.dtype)) : to_string(kv.dtype));
    case abi::DtypeRule::Scalar: return shape;
  }
  return shape;
}

// What each of ropegen_call's fields means for this spec: one line per
// argument it takes (the argument table's rows), then the in-place rule.
std::string call_doc(const RopeSpec& spec) {
  std::string out;
  auto line = [&](const std::string& field, const std::string& text) {
    out += fmt::format(" *   {:<14} {}\n", field, text);
  };
  const bool single = spec.encoding != Encoding::Rope;
  for (const abi::ArgumentInfo& a : abi::kArguments) {
    if (!takes(spec, a.feature) || (!a.c_tensor && !a.cli_flag)) continue;
    const std::string what = shape_and_dtype(spec, a);
    line(abi::user_name(a.arg, single), what.empty() ? a.doc : what + ": " + a.doc);
  }
  if (spec.encoding == Encoding::Rope && spec.output_pairing != spec.pairing)
    line("out_q/out_k", "required: this spec reads pairs one way and writes them another, so not in place");
  else
    line("in place", single ? "out NULL (or == x)" : "out_q NULL (or == q), out_k NULL (or == k)");
  if (spec.encoding == Encoding::Rope && !spec.kv_cache.enabled)
    line("backward", "nonzero: q and k are dL/d(out), out_q/out_k receive dL/d(in)");
  return out;
}

// Every compiled function: each entry for the CPU (the multi-target
// dispatcher) and for each GPU target.
std::vector<std::pair<const CompiledEntry*, const AotTarget*>> functions(const LibraryDescription& lib) {
  std::vector<const AotTarget*> targets{&lib.targets.cpu.back()};  // stands for the CPU dispatcher
  for (const AotTarget& g : lib.targets.gpu) targets.push_back(&g);
  std::vector<std::pair<const CompiledEntry*, const AotTarget*>> out;
  for (const AotTarget* t : targets)
    for (const CompiledEntry& e : lib.entries) out.emplace_back(&e, t);
  return out;
}

const char* device_constant(DeviceType d) {
  switch (d) {
    case DeviceType::CPU: return "ROPEGEN_DEVICE_CPU";
    case DeviceType::CUDA: return "ROPEGEN_DEVICE_CUDA";
    case DeviceType::Vulkan: return "ROPEGEN_DEVICE_VULKAN";
  }
  return "?";
}

std::string entry_declarations(const LibraryDescription& lib) {
  std::string out;
  for (auto [e, t] : functions(lib))
    out += fmt::format("int {0}_argv(void **args);\nconst struct halide_filter_metadata_t *{0}_metadata(void);\n",
                       entry_function(e->entry, *t));
  return out;
}

std::string entry_table(const LibraryDescription& lib) {
  std::string out;
  for (auto [e, t] : functions(lib)) {
    const bool pass = e->entry.kind == EntryPoint::Kind::PassThrough;
    const bool int64 = e->entry.explicit_positions && e->entry.variant.position_type == IdType::Int64;
    out += fmt::format("  {{{0}_argv, {0}_metadata, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},\n",
                       entry_function(e->entry, *t), pass ? 0 : e->entry.variant.with_k, int64 ? 1 : 0,
                       pass ? 0 : e->entry.variant.backward, pass ? 1 : 0, pass ? 0 : e->entry.variant.with_v,
                       device_constant(t->device), pass ? 0 : e->entry.variant.float32_norm_weights);
  }
  return out;
}

// What a CUDA call after the first does besides launching kernels.
std::string cuda_later_calls(const LibraryDescription& lib) {
  std::vector<std::string> copying;
  for (const CompiledEntry& e : lib.entries)
    if (e.cuda_copies_per_call) copying.push_back(e.entry.name);
  if (copying.empty())
    return "Later calls launch kernels and nothing\n"
           " *           else (no allocation, copy or synchronisation): they can be captured.";
  return fmt::format("Later calls allocate and synchronise nothing,\n"
                     " *           but {} of this spec's kernels ({}{})\n"
                     " *           compute a frequency table on the host and copy it to the device\n"
                     " *           at every call (on the call's stream): those calls cannot be\n"
                     " *           captured in a CUDA graph (manifest.json: cuda_graph_capturable).",
                     copying.size() == lib.entries.size() ? "all" : std::to_string(copying.size()), copying.front(),
                     copying.size() > 1 ? ", ..." : "");
}

// Which memory, which stream, what the first call costs: per device the
// library was built for.
std::string device_doc(const LibraryDescription& lib) {
  std::string out =
      " * Devices: a call runs where its tensors are (ropegen_tensor.device; all of a\n"
      " * call's tensors on one device). This library runs:\n"
      " *   cpu     host memory, on the best of its CPU targets this CPU runs\n"
      " *           (manifest.json lists them), in the calling thread and Halide's\n"
      " *           thread pool; done when the call returns.\n";
  if (const AotTarget* cuda = lib.targets.for_device(DeviceType::CUDA))
    out += fmt::format(
        " *   cuda    device memory of CUDA device device_id: data is the device pointer\n"
        " *           (CUdeviceptr, as DLPack and PyTorch give it), used in place: no copy.\n"
        " *           Kernels run in that device's primary context (the one the CUDA\n"
        " *           runtime and PyTorch use) on call->stream (a CUstream of that context;\n"
        " *           NULL: the legacy default stream), asynchronously: the call returns\n"
        " *           once they are queued; synchronise the stream before reading results.\n"
        " *           The driver is libcuda.so.1, loaded (dlopen) at the first CUDA call.\n"
        " *           The first call on each device also loads the kernels' PTX (sm_{0}:\n"
        " *           GPUs of capability {1}.{2} and newer), which the driver JIT-compiles\n"
        " *           for the GPU (once per process and device; the driver's JIT cache\n"
        " *           keeps the result across processes): make it outside any CUDA graph\n"
        " *           capture. {3}\n"
        " *           Ids, cu_seqlens and page tables on the device are the caller's to\n"
        " *           keep in range (a call cannot read them).\n",
        cuda->target.get_cuda_capability_lower_bound(), cuda->target.get_cuda_capability_lower_bound() / 10,
        cuda->target.get_cuda_capability_lower_bound() % 10, cuda_later_calls(lib));
  if (lib.targets.for_device(DeviceType::Vulkan))
    out += fmt::format(
        " *   vulkan  memory of vulkan:0 that this library's own Vulkan runtime allocated\n"
        " *           ({0}_device_alloc, at the end of this file; Halide 21 cannot use an\n"
        " *           application's VkBuffer, halide/Halide#8943, nor its VkDevice, #8715).\n"
        " *           The loader is libvulkan.so.1, loaded at the first Vulkan use, which\n"
        " *           also creates the runtime's device; the first call of each kernel\n"
        " *           compiles its SPIR-V for it (once per process). Kernels have\n"
        " *           finished when the call returns.\n",
        lib.spec.name);
  if (lib.targets.gpu.empty())
    out += " *   (no GPU: rebuild with --targets host,cuda,vulkan for device tensors)\n";
  return out;
}

// With a Vulkan target: the device memory its Vulkan tensors must live in.
std::string vulkan_memory_functions(const LibraryDescription& lib) {
  if (!lib.targets.for_device(DeviceType::Vulkan)) return "";
  return fmt::format(
      "/* Vulkan tensors: memory this library's Vulkan runtime allocates on vulkan:0\n"
      " * (Halide 21 runs kernels on no other Vulkan memory: halide/Halide#8943).\n"
      " * {0}_device_alloc gives in *data the address that stands for byte 0: a\n"
      " * ropegen_tensor's data with device {{ROPEGEN_DEVICE_VULKAN, 0}}; *data + n is\n"
      " * byte n (views of it: fused qkv slices, packed batches); never dereference\n"
      " * it. Every view a kernel binds (a tensor's first element; rope outputs:\n"
      " * their first rotary dim) must start at a multiple of the device's\n"
      " * minStorageBufferOffsetAlignment bytes into its allocation (16 on lavapipe,\n"
      " * 4 to 256 on GPUs), else the call is refused saying so. Copies take any\n"
      " * address inside an allocation and wait for the copy; calls are synchronous\n"
      " * (Halide's Vulkan runtime waits for every dispatch). Free what you allocate\n"
      " * once no call uses it. */\n"
      "static inline int {0}_device_alloc(size_t bytes, void **data, ropegen_message *message) {{\n"
      "  const ropegen_device vulkan = {{ROPEGEN_DEVICE_VULKAN, 0}};\n"
      "  return ropegen_library_device_alloc(&{1}_library_, vulkan, bytes, data, message);\n"
      "}}\n"
      "static inline int {0}_device_free(void *data, ropegen_message *message) {{\n"
      "  return ropegen_library_device_free(&{1}_library_, data, message);\n"
      "}}\n"
      "static inline int {0}_copy_to_device(void *data, const void *host, size_t bytes, ropegen_message *message) {{\n"
      "  return ropegen_library_copy_to_device(&{1}_library_, data, host, bytes, message);\n"
      "}}\n"
      "static inline int {0}_copy_to_host(void *host, const void *data, size_t bytes, ropegen_message *message) {{\n"
      "  return ropegen_library_copy_to_host(&{1}_library_, host, data, bytes, message);\n"
      "}}\n\n",
      lib.spec.name, lib.spec.name);
}

std::string device_api(const LibraryDescription& lib, DeviceType d, const char* symbol) {
  return lib.targets.for_device(d) ? fmt::format("&{}", symbol) : "NULL";
}

}  // namespace

std::string run_function(const RopeSpec& spec) { return spec.name + "_run"; }

std::string generated_header(const LibraryDescription& lib) {
  const RopeSpec& spec = lib.spec;
  const std::string n = spec.name, N = upper(spec.name), hash = spec_hash(spec);
  std::string h;
  h += fmt::format(
      "/* {0}.h: the C interface of lib{0}.a, built by rope-gen from the spec `{0}`\n"
      " * (hash {1}; manifest.json has the spec). Generated: do not edit.\n"
      " *\n"
      " * One function runs every call the spec allows:\n"
      " *   int {2}(const ropegen_call *call, ropegen_message *message);\n"
      " * It checks the call against the spec first (shapes, dtypes, strides,\n"
      " * aliasing, ids): a call that does not fit changes nothing and returns\n"
      " * ROPEGEN_ERROR_INVALID_ARGUMENT, and `message` (may be NULL) names the\n"
      " * argument. Returns ROPEGEN_OK (0) or a ropegen_status (ropegen_c.h).\n"
      " * The call's tensors (ropegen_tensor, DLPack's DLTensor) for this spec:\n"
      "{3}"
      " * Unset fields must be NULL / 0.\n"
      " *\n"
      "{6}"
      " *\n"
      " * Link: cc app.c lib{0}.a {4}\n"
      " * (the archive holds the kernels, Halide's runtime and rope-gen's C++ call\n"
      " * checks, hence libstdc++).\n"
      " */\n"
      "#ifndef ROPEGEN_{5}_H\n"
      "#define ROPEGEN_{5}_H\n\n"
      "#include \"ropegen_aot.h\"\n\n",
      n, hash, run_function(spec), call_doc(spec), link_libraries(), N, device_doc(lib));

  h += fmt::format("#define {}_SPEC_HASH \"{}\"\n", N, hash);
  h += fmt::format("#define {}_ENCODING \"{}\"\n", N, to_string(spec.encoding));
  h += fmt::format("#define {}_LAYOUT \"{}\"\n", N, to_string(spec.encoding == Encoding::Alibi ? Layout::BHSD : spec.layout));
  h += fmt::format("#define {}_DTYPE \"{}\"\n", N, to_string(spec.dtype));
  if (spec.encoding == Encoding::Rope) {
    h += fmt::format("#define {}_HEAD_DIM {}\n", N, spec.head_dim);
    h += fmt::format("#define {}_ROTARY_DIM {}\n", N, spec.rotary_dim);
    h += fmt::format("#define {}_ROTARY_OFFSET {}\n", N, spec.rotary_offset);
  } else if (spec.encoding == Encoding::Alibi) {
    h += fmt::format("#define {}_NUM_HEADS {}\n", N, spec.num_heads);
  } else {
    h += fmt::format("#define {}_DIM {}\n", N, spec.dim);
  }
  h += fmt::format("#define {}_EXPLICIT_POSITIONS {}\n\n", N, call::call_contract(spec).explicit_positions);

  h += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h += "/* The compiled entry points, in Halide's _argv form (their typed form is in\n"
       " * the <entry>.h files next to this one, which need HalideRuntime.h). */\n";
  h += entry_declarations(lib);
  h += "\n#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n";

  h += fmt::format(
      "static const ropegen_entry {}_entries_[] = {{\n  /* argv, metadata, with_k, int64_positions, backward, "
      "pass_through, with_v, device_type, float32_norm_weights */\n{}}};\n\n",
      n, entry_table(lib));
  h += fmt::format(
      "static const ropegen_library {0}_library_ = {{\n"
      "  \"{0}\", \"{1}\",\n"
      "  {2},\n"
      "  {3}, {0}_entries_,\n"
      "  {4}, {5} /* cuda, vulkan */\n"
      "}};\n\n",
      n, hash, contract_initializer(call::call_contract(spec)), functions(lib).size(),
      device_api(lib, DeviceType::CUDA, "ropegen_cuda_api"), device_api(lib, DeviceType::Vulkan, "ropegen_vulkan_api"));
  h += fmt::format(
      "/* Checks `call` against the spec and runs it (see the top of this file).\n"
      " * A static inline function; define {2}_EXPORT_RUN before including this\n"
      " * header in one C file to make it an exported function instead, e.g. for a\n"
      " * shared object that exports nothing else:\n"
      " *   cc -shared -fPIC -D{2}_EXPORT_RUN so.c lib{1}.a {3} \\\n"
      " *      -Wl,--version-script=map  (map: {{ global: {0}; local: *; }};) */\n"
      "#ifdef {2}_EXPORT_RUN\n"
      "__attribute__((visibility(\"default\"))) int {0}(const ropegen_call *call, ropegen_message *message);\n"
      "int {0}(const ropegen_call *call, ropegen_message *message) {{\n"
      "#else\n"
      "static inline int {0}(const ropegen_call *call, ropegen_message *message) {{\n"
      "#endif\n"
      "  return ropegen_library_run(&{1}_library_, call, message);\n"
      "}}\n\n"
      "{4}"
      "#endif /* ROPEGEN_{2}_H */\n",
      run_function(spec), n, N, link_libraries(), vulkan_memory_functions(lib));
  return h;
}

}  // namespace ropegen::targets::aot
