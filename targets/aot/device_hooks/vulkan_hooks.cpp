// The Vulkan side of an AOT library with a Vulkan target (linked into its
// archive only then; no Halide: the loader libvulkan.so.1 is dlopened, as
// Halide 21's Vulkan runtime in the same archive does itself).
//
// Halide's Vulkan runtime owns its VkInstance and VkDevice (it cannot adopt
// an application's: halide/Halide#8715) and can only run kernels on buffers
// it allocated (it cannot wrap a foreign VkBuffer: #8943). So a library's
// Vulkan tensors are device buffers its own runtime allocated
// (ropegen_library_device_alloc), and ready() checks, once, before that
// runtime is first used, that there is a device it can use: without one
// Halide 21's runtime fails deep inside (on some paths it aborts the
// process). It also gives that runtime the allocator setting rope-gen's
// JIT sets through HL_VK_ALLOC_CONFIG (runtime/device_call.h): every
// region a multiple of 256 bytes (Halide 21 mis-sizes others:
// halide/Halide#9223) — through the runtime's own setter, so it applies
// to this library's runtime only and changes no environment; a user's
// HL_VK_ALLOC_CONFIG is left to win.
//
// ropegen_vulkan_api (ropegen_c.h's ropegen_device_api) is what the
// generated header points the library at.
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <HalideRuntime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ropegen/ropegen_aot.h"
#include "targets/aot/device_hooks/vulkan_device_choice.h"

extern "C" {
const struct halide_device_interface_t* halide_vulkan_device_interface();
void halide_vulkan_set_alloc_config(const char* config);
}

namespace {

// What the device Halide 21's runtime picks (HL_VK_DEVICE_TYPE, else the
// first integrated or discrete GPU with a compute queue, else the first
// device) offers rope-gen's kernels.
struct Probe {
  std::string why;              // empty: it runs them
  uint64_t alignment = 256;     // minStorageBufferOffsetAlignment: where a view may be bound
  uint64_t most_bytes = 0;      // the largest allocation: maxStorageBufferRange, and kMostBytes
};

// Halide 21's Vulkan allocator mis-sizes regions whose size is not a
// multiple of the device's alignment (halide/Halide#9223): allocations are
// padded to this (and the runtime told so, ready()).
constexpr uint64_t kSizeMultiple = 256;
// A crop's offset is an int32 dim, and a view is bound from its first byte
// to the end of its allocation.
constexpr uint64_t kMostBytes = (uint64_t{1} << 31) - kSizeMultiple;

Probe probe() {
  Probe out;
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return {"the Vulkan loader libvulkan.so.1 cannot be loaded"};
  auto get_proc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  auto create = get_proc ? reinterpret_cast<PFN_vkCreateInstance>(get_proc(nullptr, "vkCreateInstance")) : nullptr;
  if (!create) return {"libvulkan.so.1 lacks vkGetInstanceProcAddr / vkCreateInstance"};
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO, nullptr, "rope-gen", 1, nullptr, 0, VK_API_VERSION_1_0};
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, nullptr, 0, &app, 0, nullptr, 0, nullptr};
  VkInstance instance = VK_NULL_HANDLE;
  if (create(&info, nullptr, &instance) != VK_SUCCESS)
    return {"no Vulkan driver could create an instance (no ICD installed? on the CPU: mesa-vulkan-drivers)"};
  auto load = [&](const char* fn) { return get_proc(instance, fn); };
  auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(load("vkDestroyInstance"));
  auto enumerate = reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(load("vkEnumeratePhysicalDevices"));
  auto properties = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties>(load("vkGetPhysicalDeviceProperties"));
  auto features = reinterpret_cast<PFN_vkGetPhysicalDeviceFeatures>(load("vkGetPhysicalDeviceFeatures"));
  auto queues = reinterpret_cast<PFN_vkGetPhysicalDeviceQueueFamilyProperties>(
      load("vkGetPhysicalDeviceQueueFamilyProperties"));
  out.why = "the Vulkan loader lacks instance functions";
  if (destroy && enumerate && properties && features && queues) {
    uint32_t n = 0;
    enumerate(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> devices(n);
    if (n > 0) enumerate(instance, &n, devices.data());
    devices.resize(n);
    if (devices.empty()) {
      out.why = "the Vulkan loader found no device";
    } else {
      const VkPhysicalDevice pick = ropegen::vulkan::halide_device_choice(devices, properties, queues);
      VkPhysicalDeviceProperties p;
      VkPhysicalDeviceFeatures f;
      properties(pick, &p);
      features(pick, &f);
      // lowering/trig.cpp: the angle and its reduction are float64, the quadrant int64.
      out.why = f.shaderFloat64 && f.shaderInt64
                    ? std::string()
                    : std::string("Vulkan device ") + p.deviceName + " lacks " +
                          (!f.shaderFloat64 ? "shaderFloat64" : "shaderInt64") + ", which rope-gen's kernels need";
      out.alignment = std::max<uint64_t>(1, p.limits.minStorageBufferOffsetAlignment);
      out.most_bytes = std::min<uint64_t>(kMostBytes, p.limits.maxStorageBufferRange);
    }
  }
  if (destroy) destroy(instance, nullptr);
  return out;
}

// Once per process: the device's answer, and the runtime's allocator
// setting before its first context.
const Probe& device() {
  static const Probe p = [] {
    if (!std::getenv("HL_VK_ALLOC_CONFIG")) halide_vulkan_set_alloc_config("0:1:0:0:256");
    return probe();
  }();
  return p;
}

int fail(ropegen_message* message, int status, const std::string& text) {
  if (message) std::snprintf(message->text, sizeof message->text, "%s", text.c_str());
  return status;
}

int ready(int32_t device_id, ropegen_message* message) {
  if (!device().why.empty()) return fail(message, ROPEGEN_ERROR_UNSUPPORTED, "vulkan:" + std::to_string(device_id) + ": " + device().why);
  if (device_id != 0)
    return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                "vulkan:" + std::to_string(device_id) +
                    ": the library's Vulkan runtime drives one device, vulkan:0 (Halide picks it; HL_VK_DEVICE_TYPE "
                    "chooses)");
  return ROPEGEN_OK;
}

// ---- Memory ----------------------------------------------------------------
//
// Each allocation is one device buffer of the runtime (uint8, padded) and a
// range of this process's address space reserved with no access (PROT_NONE:
// a host access faults) whose addresses stand for its bytes, so that call/
// checks and moves them like any device pointer. For a launch, each view's
// address becomes a crop of its allocation at that byte offset (Halide's
// device_crop: a region whose offset Vulkan binds the argument at), released
// after (the runtime waits for every dispatch). The same scheme as the
// JIT's (runtime/device_memory.h), on this library's own runtime.

struct Allocation {
  uint8_t* address = nullptr;
  size_t size = 0, reserved = 0;
  halide_dimension_t dim{};
  halide_buffer_t buffer{};  // device-only, uint8 [size padded to kSizeMultiple]
  // A crop held for the allocation's life. Halide 21's Vulkan allocator
  // counts a region's crops, not the region itself (a new region's count is
  // 0): releasing the last crop marks the region free, and the next
  // allocation reuses memory still in use (measured on lavapipe: an
  // allocation overwritten by the next one's copy after one crop at an
  // offset was released). This crop keeps the count above 0 until free().
  uint64_t pin = 0;
};

// Every live allocation by its first address. Leaked: memory may be freed
// from other objects' static destructors.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation*> allocations;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

const halide_device_interface_t* interface() { return halide_vulkan_device_interface(); }

halide_buffer_t bytes_buffer(halide_dimension_t* dim, int64_t min, int64_t extent) {
  *dim = halide_dimension_t{static_cast<int32_t>(min), static_cast<int32_t>(extent), 1, 0};
  halide_buffer_t b{};
  b.type.code = halide_type_uint, b.type.bits = 8, b.type.lanes = 1;
  b.dimensions = 1;
  b.dim = dim;
  return b;
}

// The allocation holding `address` (registry locked); nullptr: none.
Allocation* allocation_at(uintptr_t address) {
  const auto& all = registry().allocations;
  auto it = all.upper_bound(address);
  if (it == all.begin()) return nullptr;
  Allocation* a = std::prev(it)->second;
  return address < reinterpret_cast<uintptr_t>(a->address) + a->size ? a : nullptr;
}

// A crop of `a` starting `offset` bytes in; 0 when the runtime refuses.
uint64_t crop(Allocation& a, uint64_t offset) {
  halide_dimension_t dim;
  halide_buffer_t part = bytes_buffer(&dim, static_cast<int64_t>(offset), a.buffer.dim[0].extent - static_cast<int64_t>(offset));
  return interface()->device_crop(nullptr, &a.buffer, &part) == 0 ? part.device : 0;
}

void release_crop(uint64_t handle) {
  halide_dimension_t dim;
  halide_buffer_t part = bytes_buffer(&dim, 0, 1);
  part.device = handle, part.device_interface = interface();
  interface()->device_release_crop(nullptr, &part);
}

int alloc(size_t bytes, void** data, ropegen_message* message) {
  *data = nullptr;
  if (const int status = ready(0, message); status != ROPEGEN_OK) return status;
  if (bytes == 0 || bytes > device().most_bytes)
    return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                std::to_string(bytes) + " bytes cannot be allocated on vulkan:0: 1 to " +
                    std::to_string(device().most_bytes) +
                    " (the device's maxStorageBufferRange, and 2^31 - 256: a kernel argument is bound from its first "
                    "byte to the end of its allocation)");
  auto a = std::make_unique<Allocation>();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  a->reserved = (bytes + page - 1) / page * page;
  void* reserved = mmap(nullptr, a->reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED)
    return fail(message, ROPEGEN_ERROR_OUT_OF_MEMORY, std::to_string(a->reserved) + " bytes of address space cannot be reserved");
  a->address = static_cast<uint8_t*>(reserved), a->size = bytes;
  a->buffer = bytes_buffer(&a->dim, 0, static_cast<int64_t>((bytes + kSizeMultiple - 1) / kSizeMultiple * kSizeMultiple));
  if (const int code = interface()->device_malloc(nullptr, &a->buffer, interface()); code != 0) {
    munmap(a->address, a->reserved);
    return fail(message, ROPEGEN_ERROR_OUT_OF_MEMORY,
                "allocating " + std::to_string(bytes) + " bytes on vulkan:0 failed (Halide error " + std::to_string(code) +
                    "; Halide's runtime printed why)");
  }
  if ((a->pin = crop(*a, 0)) == 0) {
    interface()->device_free(nullptr, &a->buffer);
    munmap(a->address, a->reserved);
    return fail(message, ROPEGEN_ERROR_KERNEL, "a crop of new Vulkan memory failed (Halide's runtime printed why)");
  }
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().allocations[reinterpret_cast<uintptr_t>(a->address)] = a.get();
  *data = a.release()->address;
  return ROPEGEN_OK;
}

int free_memory(void* data, ropegen_message* message) {
  Allocation* a = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().allocations.find(reinterpret_cast<uintptr_t>(data));
    if (it == registry().allocations.end())
      return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                  "this address is not the start of Vulkan memory this library allocated");
    a = it->second;
    registry().allocations.erase(it);
  }
  release_crop(a->pin);
  interface()->device_free(nullptr, &a->buffer);
  munmap(a->address, a->reserved);
  delete a;
  return ROPEGEN_OK;
}

int copy(void* data, void* host, size_t bytes, int32_t to_device, ropegen_message* message) {
  if (bytes == 0) return ROPEGEN_OK;
  std::lock_guard<std::mutex> lock(registry().mutex);
  Allocation* a = allocation_at(reinterpret_cast<uintptr_t>(data));
  const uint64_t offset = a ? reinterpret_cast<uintptr_t>(data) - reinterpret_cast<uintptr_t>(a->address) : 0;
  if (!a || bytes > a->size - offset)
    return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                "the " + std::to_string(bytes) + " bytes are not inside one Vulkan allocation of this library");
  halide_dimension_t dim;
  halide_buffer_t part = bytes_buffer(&dim, 0, static_cast<int64_t>(bytes));
  part.host = static_cast<uint8_t*>(host);
  part.device = offset == 0 ? a->buffer.device : crop(*a, offset);
  if (part.device == 0) return fail(message, ROPEGEN_ERROR_KERNEL, "a crop of Vulkan memory failed (Halide's runtime printed why)");
  part.device_interface = interface();
  part.flags = to_device ? halide_buffer_flag_host_dirty : halide_buffer_flag_device_dirty;
  const int code = to_device ? interface()->copy_to_device(nullptr, &part, interface()) : interface()->copy_to_host(nullptr, &part);
  if (offset != 0) release_crop(part.device);
  if (code != 0)
    return fail(message, ROPEGEN_ERROR_KERNEL,
                std::string(to_device ? "a copy to" : "a copy from") + " Vulkan memory failed (Halide error " +
                    std::to_string(code) + "; Halide's runtime printed why)");
  return ROPEGEN_OK;
}

int bind_view(halide_buffer_t* view, const char* name, ropegen_message* message) {
  const uint64_t address = view->device;
  const int64_t bytes = view->type.bits / 8;
  // The bytes the view spans from its first element, which Vulkan binds at.
  int64_t low = 0, high = 0;
  bool empty = false;
  for (int d = 0; d < view->dimensions; ++d) {
    const int64_t reach = int64_t{view->dim[d].extent - 1} * view->dim[d].stride * bytes;
    empty = empty || view->dim[d].extent == 0;
    (reach < 0 ? low : high) += reach;
  }
  std::lock_guard<std::mutex> lock(registry().mutex);
  Allocation* a = allocation_at(empty && address > 0 ? address - 1 : address);
  if (!a) {
    char where[32];
    std::snprintf(where, sizeof where, "%#llx", static_cast<unsigned long long>(address));
    return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                std::string(name) + " (" + where + ") is not Vulkan memory this library allocated (<name>_device_alloc): "
                "Halide 21 cannot run kernels on other Vulkan memory (halide/Halide#8943)");
  }
  const uint64_t offset = address - reinterpret_cast<uintptr_t>(a->address);
  if (!empty && (low < 0 || offset + static_cast<uint64_t>(high + bytes) > a->size))
    return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                std::string(name) + " spans bytes [" + std::to_string(static_cast<int64_t>(offset) + low) + ", " +
                    std::to_string(offset + high + bytes) + ") of its Vulkan allocation of " + std::to_string(a->size) +
                    " bytes: a view must lie within its allocation and reach no byte before its first element (no "
                    "negative strides: Vulkan binds a kernel argument from there)");
  if (!empty && offset % device().alignment != 0)
    return fail(message, ROPEGEN_ERROR_INVALID_ARGUMENT,
                std::string(name) + " starts " + std::to_string(offset) +
                    " bytes into its Vulkan allocation, but this device binds kernel arguments at multiples of " +
                    std::to_string(device().alignment) +
                    " bytes (minStorageBufferOffsetAlignment): start the tensor there (rope outputs: also its first "
                    "rotary dim, rotary_offset dims in)");
  // An empty view is never read: any handle of its allocation does.
  const uint64_t handle = crop(*a, empty ? 0 : offset);
  if (handle == 0)
    return fail(message, ROPEGEN_ERROR_KERNEL,
                std::string("a crop of Vulkan memory for ") + name + " failed (Halide's runtime printed why)");
  view->device = handle;
  return ROPEGEN_OK;
}

void release_view(halide_buffer_t* view) { release_crop(view->device); }

}  // namespace

extern "C" {

// Halide 21's Vulkan runtime prints its allocator's settings to stdout
// whenever they are given (ready() gives them): a library does not write to
// its caller's stdout, so those lines are dropped; everything else goes
// where Halide's default print sends it. (A strong definition of the
// runtime's weak halide_print: in a program linking this archive
// statically, for all its Halide code; a shared object built from the
// archive keeps it to itself.)
void halide_default_print(void* user_context, const char* text);
void halide_print(void* user_context, const char* text) {
  if (std::strncmp(text, "Vulkan: Configuring allocator", 29) == 0) return;
  halide_default_print(user_context, text);
}

extern const ropegen_device_api ropegen_vulkan_api;
const ropegen_device_api ropegen_vulkan_api = {ROPEGEN_DEVICE_VULKAN, halide_vulkan_device_interface, ready, alloc,
                                               free_memory, copy, bind_view, release_view};
}
