#include "kernels/device_mirror.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "ropegen/device_memory.h"

namespace ropegen::test {
namespace {

// The driver API entry points the CUDA copies need, loaded once.
struct Cuda {
  int (*init)(unsigned);
  int (*device_get)(int*, int);
  int (*primary_context_retain)(void**, int);
  int (*push)(void*);
  int (*pop)(void**);
  int (*alloc)(unsigned long long*, size_t);
  int (*free)(unsigned long long);
  int (*to_device)(unsigned long long, const void*, size_t);
  int (*to_host)(void*, unsigned long long, size_t);
  void* context = nullptr;
};

const Cuda& cuda() {
  static const Cuda c = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error("libcuda.so.1 cannot be loaded");
    Cuda c{};
    auto symbol = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) throw std::runtime_error(std::string("libcuda.so.1 lacks ") + name);
    };
    symbol(c.init, "cuInit");
    symbol(c.device_get, "cuDeviceGet");
    symbol(c.primary_context_retain, "cuDevicePrimaryCtxRetain");
    symbol(c.push, "cuCtxPushCurrent_v2");
    symbol(c.pop, "cuCtxPopCurrent_v2");
    symbol(c.alloc, "cuMemAlloc_v2");
    symbol(c.free, "cuMemFree_v2");
    symbol(c.to_device, "cuMemcpyHtoD_v2");
    symbol(c.to_host, "cuMemcpyDtoH_v2");
    int device = 0;
    if (c.init(0) != 0 || c.device_get(&device, 0) != 0 || c.primary_context_retain(&c.context, device) != 0)
      throw std::runtime_error("CUDA device 0's primary context cannot be retained");
    return c;
  }();
  return c;
}

void check(int result, const char* what) {
  if (result != 0) throw std::runtime_error(std::string(what) + " failed (CUresult " + std::to_string(result) + ")");
}

// Runs `f` with device 0's primary context current.
template <typename F>
void in_primary_context(F f) {
  check(cuda().push(cuda().context), "cuCtxPushCurrent");
  f();
  void* popped = nullptr;
  cuda().pop(&popped);
}

}  // namespace

struct DeviceMirror::Buffer {
  const uint8_t* host;
  size_t bytes;
  DeviceMemory vulkan;       // Vulkan targets
  unsigned long long cuda = 0;  // CUDA targets: a CUdeviceptr
  Device device;

  void* data() const { return device.type == DeviceType::Vulkan ? vulkan.data() : reinterpret_cast<void*>(cuda); }
};

DeviceMirror::DeviceMirror(const Halide::Target& target) : target_(target) {}

DeviceMirror::~DeviceMirror() {
  for (const auto& b : buffers_) {
    if (!b->cuda) continue;
    void* popped = nullptr;
    cuda().push(cuda().context);  // loaded: b->cuda came from it
    cuda().free(b->cuda);
    cuda().pop(&popped);
  }
}

void DeviceMirror::add(const void* host, size_t bytes) {
  auto b = std::make_unique<Buffer>();
  b->host = static_cast<const uint8_t*>(host);
  b->bytes = bytes;
  if (target_.has_feature(Halide::Target::Vulkan)) {
    b->device = Device{DeviceType::Vulkan, 0};
    Result<DeviceMemory> m = DeviceMemory::allocate(b->device, bytes);
    if (!m) throw std::runtime_error(format(m.errors()));
    b->vulkan = std::move(m).value();
    const Status copied = b->vulkan.copy_from_host(host, bytes);
    if (!copied) throw std::runtime_error(format(copied.errors()));
  } else {
    b->device = Device{DeviceType::CUDA, 0};
    in_primary_context([&] {
      check(cuda().alloc(&b->cuda, bytes), "cuMemAlloc");
      check(cuda().to_device(b->cuda, host, bytes), "cuMemcpyHtoD");
    });
  }
  buffers_.push_back(std::move(b));
}

ropegen::Tensor DeviceMirror::on_device(const ropegen::Tensor& t) const {
  ropegen::Tensor d = t;
  const auto* at = static_cast<const uint8_t*>(t.data);
  for (const auto& b : buffers_)
    if (at >= b->host && at < b->host + b->bytes) {
      d.data = static_cast<uint8_t*>(b->data()) + (at - b->host);
      d.device = b->device;
      return d;
    }
  ADD_FAILURE() << "a tensor outside every mirrored buffer";
  d.data = nullptr;
  return d;
}

Call DeviceMirror::on_device(const Call& c) const {
  Call d = c;
  for (std::optional<ropegen::Tensor>* t :
       {&d.q, &d.k, &d.out_q, &d.out_k, &d.positions, &d.cu_seqlens, &d.table, &d.freqs, &d.cos_sin_cache, &d.v,
        &d.k_cache, &d.v_cache, &d.kv_indices, &d.kv_indptr, &d.batch_indices, &d.cache_positions, &d.slot_mapping,
        &d.saved_q, &d.saved_k, &d.d_freqs})
    if (*t) **t = on_device(**t);
  return d;
}

void DeviceMirror::copy_back() const {
  for (const auto& b : buffers_) {
    auto* host = const_cast<uint8_t*>(b->host);
    if (b->device.type == DeviceType::Vulkan) {
      const Status copied = b->vulkan.copy_to_host(host, b->bytes);
      if (!copied) throw std::runtime_error(format(copied.errors()));
    } else {
      in_primary_context([&] { check(cuda().to_host(host, b->cuda, b->bytes), "cuMemcpyDtoH"); });
    }
  }
}

}  // namespace ropegen::test
