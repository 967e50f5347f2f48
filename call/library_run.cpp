// ropegen_library_run: the C entry of AOT libraries (ropegen_aot.h). Each
// library's generated header passes its ropegen_library (the contract and
// the entry points); the call goes through prepare_call like every other.
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "call/argv_entry.h"
#include "call/fixed_vector.h"
#include "call/contract.h"
#include "call/device_context.h"
#include "call/device_views.h"
#include "call/prepare_call.h"
#include "ropegen/ropegen_aot.h"

// The Halide runtime's, from the AOT archive this file is merged into. Weak:
// rope-gen's own call library has no Halide runtime (null: 1 thread).
extern "C" __attribute__((weak)) int halide_get_num_threads();

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
        (e.with_v != 0) == v.with_v && (e.float32_norm_weights != 0) == v.float32_norm_weights &&
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
    if (s.arg == abi::Arg::SeqLen) return true;
  return false;
}

// The library's support for a GPU API: nullptr when it was built without.
const ropegen_device_api* device_api(const ropegen_library& lib, DeviceType device) {
  if (device == DeviceType::CUDA) return lib.cuda;
  if (device == DeviceType::Vulkan) return lib.vulkan;
  return nullptr;
}

// A device call's launches through the library's GPU entries: the call's
// device and stream as their user_context (call/device_context.h), and per
// part: CUDA, the 16-byte alignment the schedule's vectors need; Vulkan,
// each view's address turned into a handle of the library's runtime
// (ropegen_device_api.bind_view), released after the launch.
class LibraryLaunch : public DeviceLaunch {
 public:
  LibraryLaunch(const ropegen_device_api& api, const ropegen_contract& contract, const PreparedCall& call,
                ropegen_message* message)
      : api_(api), contract_(contract), message_(message) {
    context_.device_type = static_cast<int32_t>(call.device.type), context_.device_id = call.device.id;
    context_.stream = call.stream;
  }
  void* user_context() override { return &context_; }
  bool prepare(BoundPart& part) override {
    if (api_.device_type == ROPEGEN_DEVICE_CUDA) return check_cuda_alignment(part);
    for_each_view(part, contract_, [&](RawBuffer& view, const std::string& name) {
      if (status != ROPEGEN_OK) return;
      status = api_.bind_view(view.get(), name.c_str(), message_);
      if (status == ROPEGEN_OK) bound_.push_back(view.get());
    });
    return status == ROPEGEN_OK;
  }
  void release() override {
    for (halide_buffer_t* view : bound_) api_.release_view(view);
    bound_ = {};
  }

  int status = ROPEGEN_OK;  // why a part was refused

 private:
  bool check_cuda_alignment(const BoundPart& part) {
    const std::optional<std::string> misaligned = cuda_misalignment(part, contract_);
    if (misaligned) status = fail(message_, ROPEGEN_ERROR_INVALID_ARGUMENT, *misaligned);
    return !misaligned;
  }

  const ropegen_device_api& api_;
  ropegen_contract contract_;
  ropegen_message* message_;
  DeviceContext context_;
  FixedVector<halide_buffer_t*, 32> bound_;
};

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
    if (const int status = api->ready(device.id, message); status != ROPEGEN_OK) return status;
  }
  const KernelVariant& v = prepared->variant;
  const ropegen_entry* entry = find_entry(lib, v, device.type);
  const ropegen_entry* copy = has_pass_through(lib.contract) ? find_pass_through(lib, device.type) : nullptr;
  if (!entry || (has_pass_through(lib.contract) && !copy))
    return fail(message, ROPEGEN_ERROR_UNSUPPORTED,
                fmt::format("{} has no entry point for this call ({}{}{}{}{}, {})", lib.name,
                            v.with_k ? "q and k" : "q alone", v.with_v ? ", v" : "", v.backward ? ", backward" : "",
                            v.position_type == IdType::Int64 ? ", int64 ids" : "",
                            v.float32_norm_weights ? ", float32 norm weights" : "", to_string(device.type)));
  const std::string where = fmt::format("lib{}.a", lib.name);
  Result<ArgvEntry> rope = resolve_entry(where, "rope", entry->argv, entry->metadata ? entry->metadata() : nullptr, false,
                                         halide_get_num_threads);
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
  const ropegen_contract kc = kernel_contract(lib.contract, v);
  std::optional<LibraryLaunch> launch;
  if (api) launch.emplace(*api, kc, *prepared, message);
  const ArgvEntry* failed = nullptr;
  const int code = run_prepared(kc, *prepared, api ? api->interface() : nullptr, *rope, pass ? &*pass : nullptr, &failed,
                                launch ? &*launch : nullptr);
  if (launch && launch->status != ROPEGEN_OK) return launch->status;  // refused before a launch, message written
  if (code != 0)
    return fail(message, ROPEGEN_ERROR_KERNEL,
                fmt::format("{}: a kernel ({}) failed with Halide error {} (Halide's runtime printed why)", lib.name,
                            failed ? failed->name : "?", code));
  if (message) message->text[0] = '\0';
  return ROPEGEN_OK;
}

}  // namespace
}  // namespace ropegen::call

namespace ropegen::call {
namespace {

// The library's Vulkan memory functions for `device`, or why not.
const ropegen_device_api* memory_api(const ropegen_library* lib, ropegen_device device, ropegen_message* message,
                                     int* status) {
  *status = ROPEGEN_OK;
  if (!lib) return *status = fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT, "library must not be NULL"), nullptr;
  if (device.device_type == ROPEGEN_DEVICE_VULKAN && lib->vulkan && lib->vulkan->alloc) return lib->vulkan;
  *status = fail(message, ROPEGEN_ERROR_UNSUPPORTED,
                 device.device_type == ROPEGEN_DEVICE_VULKAN
                     ? fmt::format("lib{0}.a has no vulkan target; rebuild it with rope-gen build --targets host,vulkan",
                                   lib->name)
                     : fmt::format("lib{}.a allocates Vulkan memory only: CUDA tensors are your own device memory "
                                   "(cudaMalloc, PyTorch), host tensors your host memory",
                                   lib->name));
  return nullptr;
}

template <typename F>
int guarded(ropegen_message* message, F f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(message, ROPEGEN_ERROR_OUT_OF_MEMORY, "out of memory");
  }
}

}  // namespace
}  // namespace ropegen::call

extern "C" int ropegen_library_device_alloc(const ropegen_library* library, ropegen_device device, size_t bytes,
                                            void** data, ropegen_message* message) {
  using namespace ropegen::call;
  if (!data) return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT, "data must not be NULL");
  *data = nullptr;
  int status;
  const ropegen_device_api* api = memory_api(library, device, message, &status);
  if (!api) return status;
  if ((status = api->ready(device.device_id, message)) != ROPEGEN_OK) return status;
  return guarded(message, [&] { return api->alloc(bytes, data, message); });
}

extern "C" int ropegen_library_device_free(const ropegen_library* library, void* data, ropegen_message* message) {
  using namespace ropegen::call;
  int status;
  const ropegen_device_api* api = memory_api(library, {ROPEGEN_DEVICE_VULKAN, 0}, message, &status);
  if (!api) return status;
  return data ? guarded(message, [&] { return api->free(data, message); }) : ROPEGEN_OK;
}

extern "C" int ropegen_library_copy_to_device(const ropegen_library* library, void* data, const void* host,
                                              size_t bytes, ropegen_message* message) {
  using namespace ropegen::call;
  int status;
  const ropegen_device_api* api = memory_api(library, {ROPEGEN_DEVICE_VULKAN, 0}, message, &status);
  if (!api) return status;
  return guarded(message, [&] { return api->copy(data, const_cast<void*>(host), bytes, 1, message); });
}

extern "C" int ropegen_library_copy_to_host(const ropegen_library* library, void* host, const void* data, size_t bytes,
                                            ropegen_message* message) {
  using namespace ropegen::call;
  int status;
  const ropegen_device_api* api = memory_api(library, {ROPEGEN_DEVICE_VULKAN, 0}, message, &status);
  if (!api) return status;
  return guarded(message, [&] { return api->copy(const_cast<void*>(data), host, bytes, 0, message); });
}

extern "C" int ropegen_library_run(const ropegen_library* library, const ropegen_call* call, ropegen_message* message) {
  if (!library || !call)
    return ropegen::call::fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT, "library and call must not be NULL");
  try {
    return ropegen::call::run(*library, *call, message);
  } catch (const std::bad_alloc&) {
    return ropegen::call::fail(message, ROPEGEN_ERROR_OUT_OF_MEMORY, "out of memory");
  }
}
