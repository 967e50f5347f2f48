#include "kernels/device_mirror.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "abi/arguments.h"
#include "base/cuda_driver_api.h"
#include "ropegen/device_memory.h"

namespace ropegen::test {
namespace {

// The driver API entry points the CUDA copies need, loaded once, and
// device 0's primary context.
struct Cuda : ropegen_cuda_driver {
  ropegen_CUcontext context = nullptr;
};

const Cuda& cuda() {
  static const Cuda c = [] {
    Cuda c;
    const unsigned long long needs =
        ROPEGEN_CUDA_NEEDS(cuInit) | ROPEGEN_CUDA_NEEDS(cuDeviceGet) | ROPEGEN_CUDA_NEEDS(cuDevicePrimaryCtxRetain) |
        ROPEGEN_CUDA_NEEDS(cuCtxPushCurrent_v2) | ROPEGEN_CUDA_NEEDS(cuCtxPopCurrent_v2) |
        ROPEGEN_CUDA_NEEDS(cuMemAlloc_v2) | ROPEGEN_CUDA_NEEDS(cuMemFree_v2) | ROPEGEN_CUDA_NEEDS(cuMemcpyHtoD_v2) |
        ROPEGEN_CUDA_NEEDS(cuMemcpyDtoH_v2);
    if (!ropegen_cuda_driver_load(&c, needs, 0))
      throw std::runtime_error(c.library ? std::string("libcuda.so.1 lacks ") + c.missing
                                         : std::string("libcuda.so.1 cannot be loaded"));
    ropegen_CUdevice device = 0;
    if (c.cuInit(0) != 0 || c.cuDeviceGet(&device, 0) != 0 || c.cuDevicePrimaryCtxRetain(&c.context, device) != 0)
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
  check(cuda().cuCtxPushCurrent_v2(cuda().context), "cuCtxPushCurrent");
  f();
  ropegen_CUcontext popped = nullptr;
  cuda().cuCtxPopCurrent_v2(&popped);
}

}  // namespace

struct DeviceMirror::Buffer {
  const uint8_t* host;
  size_t bytes;
  DeviceMemory vulkan;           // Vulkan targets
  ropegen_CUdeviceptr cuda = 0;  // CUDA targets
  Device device;

  void* data() const { return device.type == DeviceType::Vulkan ? vulkan.data() : reinterpret_cast<void*>(cuda); }
};

DeviceMirror::DeviceMirror(const Halide::Target& target) : target_(target) {}

DeviceMirror::~DeviceMirror() {
  for (const auto& b : buffers_) {
    if (!b->cuda) continue;
    ropegen_CUcontext popped = nullptr;
    cuda().cuCtxPushCurrent_v2(cuda().context);  // loaded: b->cuda came from it
    cuda().cuMemFree_v2(b->cuda);
    cuda().cuCtxPopCurrent_v2(&popped);
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
      check(cuda().cuMemAlloc_v2(&b->cuda, bytes), "cuMemAlloc");
      check(cuda().cuMemcpyHtoD_v2(b->cuda, host, bytes), "cuMemcpyHtoD");
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
  for (const abi::ArgumentInfo& a : abi::kArguments)  // every tensor of the call, by the argument table
    if (a.call_tensor && d.*a.call_tensor) *(d.*a.call_tensor) = on_device(*(d.*a.call_tensor));
  return d;
}

void DeviceMirror::copy_back() const {
  for (const auto& b : buffers_) {
    auto* host = const_cast<uint8_t*>(b->host);
    if (b->device.type == DeviceType::Vulkan) {
      const Status copied = b->vulkan.copy_to_host(host, b->bytes);
      if (!copied) throw std::runtime_error(format(copied.errors()));
    } else {
      in_primary_context([&] { check(cuda().cuMemcpyDtoH_v2(host, b->cuda, b->bytes), "cuMemcpyDtoH"); });
    }
  }
}

}  // namespace ropegen::test
