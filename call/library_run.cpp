// ropegen_library_run: the C entry of AOT libraries (ropegen_c.h). Each
// library's generated header passes its ropegen_library (the contract and
// the entry points); the call goes through prepare_call like every other.
#include <cstdio>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "call/argv_entry.h"
#include "call/contract.h"
#include "call/device_context.h"
#include "call/prepare_call.h"
#include "ropegen/ropegen_c.h"

namespace ropegen::call {
namespace {

int fail(ropegen_message* message, int status, const std::string& text) {
  if (message) std::snprintf(message->text, sizeof message->text, "%s", text.c_str());
  return status;
}

std::string lines(const std::vector<Diagnostic>& errors) {
  std::string out;
  for (const Diagnostic& d : errors) out += fmt::format("{}: {}\n", d.where.file, d.message);
  return out;
}

bool runs_on(const ropegen_entry& e, DeviceType device) {
  // 0: a CPU entry of a header written before entries named their device.
  return e.device_type == static_cast<int32_t>(device) || (e.device_type == 0 && device == DeviceType::CPU);
}

const ropegen_entry* find_entry(const ropegen_library& lib, const KernelVariant& v, DeviceType device) {
  for (int32_t i = 0; i < lib.num_entries; ++i) {
    const ropegen_entry& e = lib.entries[i];
    if (runs_on(e, device) && !e.pass_through && (e.with_k != 0) == v.with_k && (e.backward != 0) == v.backward &&
        (e.with_v != 0) == v.with_v &&
        (!lib.contract.explicit_positions || (e.int64_positions != 0) == (v.position_type == IdType::Int64)))
      return &e;
  }
  return nullptr;
}

const ropegen_entry* find_pass_through(const ropegen_library& lib, DeviceType device) {
  for (int32_t i = 0; i < lib.num_entries; ++i)
    if (lib.entries[i].pass_through && runs_on(lib.entries[i], device)) return &lib.entries[i];
  return nullptr;
}

// Whether a kernel takes seq_len (dynamic NTK, LongRoPE per call, xPos).
bool reads_seq_len(const ArgvEntry& f) {
  for (const ArgumentSource& s : f.sources)
    if (s.rope_scalar == &RopeArguments::seq_len) return true;
  return false;
}

// The library's support for a GPU API: nullptr when it was built without.
const ropegen_device_api* device_api(const ropegen_library& lib, DeviceType device) {
  if (device == DeviceType::CUDA) return lib.cuda;
  if (device == DeviceType::Vulkan) return lib.vulkan;
  return nullptr;
}

int run(const ropegen_library& lib, const ropegen_call& c, ropegen_message* message) {
  const Result<Call> call = Call::from_c(c);
  if (!call) return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT, lines(call.errors()));
  const Result<PreparedCall> prepared = prepare_call(lib.contract, *call);
  if (!prepared) return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT, lines(prepared.errors()));
  // A device call runs on the library's kernels for that device, through its
  // own Halide runtime, once the device is ready (ropegen_device_api).
  const Device device = prepared->device;
  const ropegen_device_api* api = device_api(lib, device.type);
  if (prepared->on_device()) {
    if (!api)
      return fail(message, ROPEGEN_ERROR_UNSUPPORTED,
                  fmt::format("{0}: {1} is on {2}:{3} but lib{0}.a has no {2} target; rebuild it with rope-gen build "
                              "--targets host,{2}",
                              lib.name, input_name(lib.contract), to_string(device.type), device.id));
    if (device.type == DeviceType::Vulkan)
      return fail(message, ROPEGEN_ERROR_UNSUPPORTED,
                  fmt::format("{}: {} is on vulkan:{}: Vulkan device tensors are not supported by AOT libraries yet",
                              lib.name, input_name(lib.contract), device.id));
    if (const int status = api->ready(device.id, message); status != ROPEGEN_OK) return status;
  }
  const KernelVariant& v = prepared->variant;
  const ropegen_entry* entry = find_entry(lib, v, device.type);
  const ropegen_entry* copy = has_pass_through(lib.contract) ? find_pass_through(lib, device.type) : nullptr;
  if (!entry || (has_pass_through(lib.contract) && !copy))
    return fail(message, ROPEGEN_ERROR_UNSUPPORTED,
                fmt::format("{} has no entry point for this call ({}{}{}{}, {})", lib.name, v.with_k ? "q and k" : "q alone",
                            v.with_v ? ", v" : "", v.backward ? ", backward" : "",
                            v.position_type == IdType::Int64 ? ", int64 ids" : "", to_string(device.type)));
  const std::string where = fmt::format("lib{}.a", lib.name);
  Result<ArgvEntry> rope = resolve_entry(where, "rope", entry->argv, entry->metadata ? entry->metadata() : nullptr, false);
  if (!rope) return fail(message, ROPEGEN_ERROR_UNSUPPORTED, lines(rope.errors()));
  if (!prepared->seq_len_known && reads_seq_len(*rope))
    return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                fmt::format("seq_len: {}'s frequencies depend on the sequence length, which a call cannot derive from "
                            "positions on {}:{}: pass seq_len (as Hugging Face: the largest position + 1)",
                            lib.name, to_string(device.type), device.id));
  std::optional<ArgvEntry> pass;
  if (copy) {
    Result<ArgvEntry> r = resolve_entry(where, "pass_through", copy->argv, copy->metadata ? copy->metadata() : nullptr, true);
    if (!r) return fail(message, ROPEGEN_ERROR_UNSUPPORTED, lines(r.errors()));
    pass = std::move(r).value();
  }
  // What the GPU entries' __user_context carries to the runtime's hooks.
  DeviceContext context;
  context.device_type = static_cast<int32_t>(device.type), context.device_id = device.id;
  context.stream = prepared->stream;
  const ArgvEntry* failed = nullptr;
  const int code = run_prepared(kernel_contract(lib.contract, v), *prepared, api ? api->interface() : nullptr, *rope,
                                pass ? &*pass : nullptr, &failed, api ? &context : nullptr);
  if (code != 0)
    return fail(message, ROPEGEN_ERROR_KERNEL,
                fmt::format("{}: a kernel ({}) failed with Halide error {} (Halide's runtime printed why)", lib.name,
                            failed ? failed->name : "?", code));
  if (message) message->text[0] = '\0';
  return ROPEGEN_OK;
}

}  // namespace
}  // namespace ropegen::call

extern "C" int ropegen_library_run(const ropegen_library* library, const ropegen_call* call, ropegen_message* message) {
  if (!library || !call)
    return ropegen::call::fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT, "library and call must not be NULL");
  try {
    return ropegen::call::run(*library, *call, message);
  } catch (const std::bad_alloc&) {
    return ropegen::call::fail(message, ROPEGEN_ERROR_OUT_OF_MEMORY, "out of memory");
  }
}
