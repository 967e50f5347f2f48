#include "memory.h"

#include <cstdlib>
#include <cstring>

#include "cuda_driver.h"

namespace kit {
namespace {

class HostMemory : public Memory {
 public:
  ~HostMemory() override { release(); }
  const char* name() const override { return "host"; }
  ropegen_device device() const override { return {ROPEGEN_DEVICE_CPU, 0}; }
  void* stream() const override { return nullptr; }
  void* allocate(size_t bytes) override {
    // 64-byte aligned as a framework's allocations are.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (!p) throw std::bad_alloc();
    blocks_.push_back(p);
    return p;
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill(void* dst, uint8_t byte, size_t bytes) override { std::memset(dst, byte, bytes); }
  void synchronize() override {}
  void release() override {
    for (void* p : blocks_) std::free(p);
    blocks_.clear();
  }

 private:
  std::vector<void*> blocks_;
};

class CudaMemory : public Memory {
 public:
  explicit CudaMemory(const CudaDriver& d) : d_(d) { 
    // A blocking stream: it orders after the synchronous copies and memsets
    // below, which run on the legacy stream (a host-to-device copy may return
    // before its DMA lands).
    d_.check(d_.cuStreamCreate(&stream_, 0), "cuStreamCreate");
  }
  ~CudaMemory() override { release(); }
  const char* name() const override { return "cuda"; }
  ropegen_device device() const override { return {ROPEGEN_DEVICE_CUDA, 0}; }
  void* stream() const override { return stream_; }
  void* allocate(size_t bytes) override {
    CUdeviceptr p = 0;
    d_.check(d_.cuMemAlloc_v2(&p, bytes + 64), "cuMemAlloc");
    blocks_.push_back(p);
    return reinterpret_cast<void*>(p);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    d_.check(d_.cuMemcpyHtoD_v2(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
  }
  void download(void* dst, const void* src, size_t bytes) override {
    synchronize();  // the call ran on our stream; a synchronous copy runs on the legacy one
    d_.check(d_.cuMemcpyDtoH_v2(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
  }
  void fill(void* dst, uint8_t byte, size_t bytes) override {
    d_.check(d_.cuMemsetD8_v2(reinterpret_cast<CUdeviceptr>(dst), byte, bytes), "cuMemsetD8");
  }
  void synchronize() override { d_.check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize (a kernel's error surfaces here)"); }
  void release() override {
    for (CUdeviceptr p : blocks_) d_.cuMemFree_v2(p);
    blocks_.clear();
  }

 private:
  const CudaDriver& d_;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> blocks_;
};

}  // namespace

std::unique_ptr<Memory> host_memory() { return std::make_unique<HostMemory>(); }
std::unique_ptr<Memory> cuda_memory(const CudaDriver& driver) { return std::make_unique<CudaMemory>(driver); }

}  // namespace kit
