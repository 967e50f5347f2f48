#include "runtime/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include <Halide.h>
#include <fmt/format.h>

#include "runtime/device_call.h"
#include "runtime/device_probe.h"
#include "runtime/halide_messages.h"
#include "runtime/kernel.h"

namespace ropegen {

namespace {

// Halide 21's Vulkan allocator mis-sizes regions whose size is not a
// multiple of the device's alignment (halide/Halide#9223; device_call.h):
// allocations are padded to this, as the staged buffers.
constexpr uint64_t kSizeMultiple = 256;
// The largest allocation: its crops' offsets are int32 dims (and a view is
// bound from its first byte to the end of its allocation).
constexpr uint64_t kMostBytes = (uint64_t{1} << 31) - kSizeMultiple;

// Calls into Halide's runtime outside a pipeline: its error messages kept
// for the diagnostic, its prints quiet (runtime/halide_messages.h).
struct RuntimeCall : Halide::JITUserContext {
  RuntimeCall() {
    handlers.custom_print = runtime::quiet_runtime_print;
    handlers.custom_error = [](Halide::JITUserContext* c, const char* message) {
      static_cast<RuntimeCall*>(c)->message += message;
    };
  }
  // What failed, with Halide's own words (`code`: a halide_error_code_t).
  std::string failure(const std::string& what, int code) const {
    std::string why = message;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return fmt::format("{} failed (Halide error {}{}{})", what, code, why.empty() ? "" : ": ", why);
  }
  std::string message;
};

halide_buffer_t bytes_buffer(halide_dimension_t* dim, int64_t min, int64_t extent) {
  *dim = halide_dimension_t{static_cast<int32_t>(min), static_cast<int32_t>(extent), 1, 0};
  halide_buffer_t b{};
  b.type = halide_type_t(halide_type_uint, 8);
  b.dimensions = 1;
  b.dim = dim;
  return b;
}

void release_crop(uint64_t handle, const halide_device_interface_t* interface, RuntimeCall& call) {
  halide_dimension_t dim;
  halide_buffer_t part = bytes_buffer(&dim, 0, 1);
  part.device = handle, part.device_interface = interface;
  interface->device_release_crop(&call, &part);
}

}  // namespace

// One Vulkan allocation: its device buffer (the whole of it, uint8, padded)
// and the address range that stands for it.
struct DeviceMemory::Allocation {
  ~Allocation();

  // A crop of the buffer starting `offset` bytes in (Halide's device_crop: a
  // MemoryRegion of its own whose offset is the binding's), or 0 with the
  // reason in `call`.
  uint64_t crop(uint64_t offset, RuntimeCall& call) {
    halide_dimension_t dim;
    halide_buffer_t part = bytes_buffer(&dim, static_cast<int64_t>(offset), buffer.dim[0].extent - offset);
    return interface->device_crop(&call, &buffer, &part) == 0 ? part.device : 0;
  }
  // Bytes [offset, offset + n) with host memory at `host`: a buffer of them
  // (a crop unless offset is 0), the copy, the crop released.
  Status copy(void* host, size_t n, size_t offset, bool to_device) {
    if (offset > size || n > size - offset)
      return named_error("DeviceMemory", fmt::format("bytes [{}, {}) are outside this allocation of {} bytes", offset,
                                                     offset + n, size));
    if (n == 0) return {};
    RuntimeCall call;
    halide_dimension_t dim;
    halide_buffer_t part = bytes_buffer(&dim, 0, static_cast<int64_t>(n));
    part.host = static_cast<uint8_t*>(host);
    part.device = offset == 0 ? buffer.device : crop(offset, call);
    if (part.device == 0)
      return named_error("DeviceMemory", call.failure("a crop of Vulkan memory", halide_error_code_device_crop_failed));
    part.device_interface = interface;
    part.flags = to_device ? halide_buffer_flag_host_dirty : halide_buffer_flag_device_dirty;
    const int code = to_device ? interface->copy_to_device(&call, &part, interface) : interface->copy_to_host(&call, &part);
    if (offset != 0) release_crop(part.device, interface, call);
    if (code != 0)
      return named_error("DeviceMemory",
                         call.failure(to_device ? "a copy to Vulkan memory" : "a copy from Vulkan memory", code));
    return {};
  }

  uint8_t* address = nullptr;  // reserved with no access
  size_t size = 0, reserved = 0;
  halide_dimension_t dim{};
  halide_buffer_t buffer{};  // device-only, uint8 [size padded to kSizeMultiple]
  const halide_device_interface_t* interface = nullptr;
  // A crop held for the allocation's life. Halide 21's Vulkan allocator
  // counts a region's crops, not the region (a new region counts 0):
  // releasing the last crop of a view marks the region free, and the next
  // allocation reuses memory still in use (measured on lavapipe by the AOT
  // libraries' tests, which hold one the same way: device_hooks/vulkan_hooks.cpp).
  uint64_t pin = 0;
};

namespace {

// Every live allocation by its first address. Leaked: allocations may be
// freed by static destructors of other objects.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, DeviceMemory::Allocation*> allocations;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

DeviceMemory::Allocation::~Allocation() {
  if (address) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().allocations.erase(reinterpret_cast<uintptr_t>(address));
  }
  if (buffer.device) {
    RuntimeCall call;  // nothing to report to from a destructor
    if (pin) release_crop(pin, interface, call);
    interface->device_free(&call, &buffer);
  }
  if (address) munmap(address, reserved);
}

Result<DeviceMemory> DeviceMemory::allocate(Device device, size_t bytes) {
  switch (device.type) {
    case DeviceType::CPU:
      return named_error("DeviceMemory",
                         "host (cpu) tensors are the caller's memory: DeviceMemory allocates on a Vulkan device");
    case DeviceType::CUDA:
      return named_error(
          "DeviceMemory",
          "CUDA tensors are the caller's own device memory (cudaMalloc, PyTorch): pass their device pointers "
          "as Tensor::data; DeviceMemory allocates on Vulkan, where Halide 21 cannot use memory it did not "
          "allocate");
    case DeviceType::Vulkan: break;
  }
  if (device.id != 0)
    return named_error(
        "DeviceMemory",
        fmt::format("vulkan:{} is not a device rope-gen can allocate on: Halide's Vulkan runtime runs on one "
                    "device per process, vulkan:0",
                    device.id));
  const Result<Halide::Target> target = runtime::runnable_target("vulkan");
  if (!target) return target.errors();
  const Result<runtime::DeviceInfo> info = runtime::probe_device(*target);
  if (!info) return info.errors();
  const uint64_t most = std::min<uint64_t>(kMostBytes, static_cast<uint64_t>(info->max_buffer_bytes));
  if (bytes == 0 || bytes > most)
    return named_error("DeviceMemory",
                       fmt::format("{} bytes cannot be allocated: 1 to {} bytes on {} (its maxStorageBufferRange, and "
                                   "2^31 - 256: a kernel argument is bound from its first byte to the end of its "
                                   "allocation)",
                                   bytes, most, info->description));
  runtime::prepare_device_runtime(*target);

  auto a = std::make_unique<Allocation>();
  try {
    a->interface = Halide::get_device_interface_for_device_api(Halide::DeviceAPI::Vulkan, *target);
  } catch (const Halide::Error& e) {
    return named_error("DeviceMemory", fmt::format("Halide's Vulkan runtime cannot be loaded: {}", e.what()));
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  a->reserved = (bytes + page - 1) / page * page;
  void* reserved = mmap(nullptr, a->reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED)
    return named_error("DeviceMemory", fmt::format("{} bytes of address space cannot be reserved", a->reserved));
  a->address = static_cast<uint8_t*>(reserved);
  a->size = bytes;
  const int64_t padded = static_cast<int64_t>((bytes + kSizeMultiple - 1) / kSizeMultiple * kSizeMultiple);
  a->buffer = bytes_buffer(&a->dim, 0, padded);
  RuntimeCall call;
  if (const int code = a->interface->device_malloc(&call, &a->buffer, a->interface); code != 0) {
    a->buffer.device = 0;
    return named_error("DeviceMemory",
                       call.failure(fmt::format("allocating {} bytes on {}", bytes, info->description), code));
  }
  if ((a->pin = a->crop(0, call)) == 0)
    return named_error("DeviceMemory",
                       call.failure("a crop of new Vulkan memory", halide_error_code_device_crop_failed));
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().allocations[reinterpret_cast<uintptr_t>(a->address)] = a.get();
  }
  return DeviceMemory(std::move(a));
}

DeviceMemory::DeviceMemory() = default;
DeviceMemory::DeviceMemory(std::unique_ptr<Allocation> allocation) : allocation_(std::move(allocation)) {}
DeviceMemory::DeviceMemory(DeviceMemory&&) noexcept = default;
DeviceMemory& DeviceMemory::operator=(DeviceMemory&&) noexcept = default;
DeviceMemory::~DeviceMemory() = default;

void* DeviceMemory::data() const { return allocation_ ? allocation_->address : nullptr; }
size_t DeviceMemory::size() const { return allocation_ ? allocation_->size : 0; }
Device DeviceMemory::device() const { return Device{DeviceType::Vulkan, 0}; }

Status DeviceMemory::copy_from_host(const void* source, size_t bytes, size_t offset) {
  if (!allocation_) return named_error("DeviceMemory", "this DeviceMemory holds no allocation");
  return allocation_->copy(const_cast<void*>(source), bytes, offset, /*to_device=*/true);
}

Status DeviceMemory::copy_to_host(void* destination, size_t bytes, size_t offset) const {
  if (!allocation_) return named_error("DeviceMemory", "this DeviceMemory holds no allocation");
  return allocation_->copy(destination, bytes, offset, /*to_device=*/false);
}

namespace runtime {

VulkanViews::~VulkanViews() {
  RuntimeCall call;
  for (const Crop& c : crops_) release_crop(c.handle, c.interface, call);
}

void VulkanViews::bind(call::RawBuffer& view, const std::string& name) {
  const uint64_t address = view.buf.device;
  const int64_t bytes = view.buf.type.bytes();
  // The bytes the view spans from its first element, which Vulkan binds at.
  int64_t low = 0, high = 0;
  bool empty = false;
  for (int d = 0; d < view.buf.dimensions; ++d) {
    const int64_t reach = int64_t{view.buf.dim[d].extent - 1} * view.buf.dim[d].stride * bytes;
    empty = empty || view.buf.dim[d].extent == 0;
    (reach < 0 ? low : high) += reach;
  }
  std::lock_guard<std::mutex> lock(registry().mutex);
  const auto& all = registry().allocations;
  auto it = all.upper_bound(address);
  DeviceMemory::Allocation* a = it == all.begin() ? nullptr : std::prev(it)->second;
  if (!a || address >= reinterpret_cast<uintptr_t>(a->address) + a->size + (empty ? 1 : 0))
    throw KernelFailure(fmt::format("{} ({:#x}) is not in memory rope-gen allocated on Vulkan (ropegen::DeviceMemory): "
                                    "Halide 21 cannot run kernels on other Vulkan memory (halide/Halide#8943)",
                                    name, address));
  if (a->interface != view.buf.device_interface)
    throw KernelFailure(fmt::format("{} is memory of another Halide Vulkan runtime than this kernel's (a target with "
                                    "-debug has its own): allocate it for a target without -debug",
                                    name));
  const uint64_t offset = address - reinterpret_cast<uintptr_t>(a->address);
  if (!empty && (low < 0 || offset + high + bytes > a->size))
    throw KernelFailure(fmt::format("{} spans bytes [{}, {}) of its Vulkan allocation of {} bytes: a view must lie "
                                    "within its allocation and reach no byte before its first element (no negative "
                                    "strides: Vulkan binds a kernel argument from there)",
                                    name, static_cast<int64_t>(offset) + low, offset + high + bytes, a->size));
  if (!empty && offset % static_cast<uint64_t>(alignment_) != 0)
    throw KernelFailure(fmt::format("{} starts {} bytes into its Vulkan allocation, but this device binds kernel "
                                    "arguments at multiples of {} bytes (minStorageBufferOffsetAlignment): start the "
                                    "tensor there (rope outputs: also its first rotary dim, rotary_offset dims in)",
                                    name, offset, alignment_));
  RuntimeCall call;
  // An empty view is never read: any handle of its allocation does.
  const uint64_t handle = a->crop(empty ? 0 : offset, call);
  if (handle == 0)
    throw KernelFailure(call.failure(fmt::format("a crop of Vulkan memory for {}", name), halide_error_code_device_crop_failed));
  crops_.push_back({handle, a->interface});
  view.buf.device = handle;
}

}  // namespace runtime
}  // namespace ropegen
