// Where a call's tensors live: host memory, or device memory of the CUDA
// driver (the caller's stream; the primary context). The parity checks run
// the same steps on both, so what differs is only where the bytes are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ropegen_c.h"

namespace kit {

struct CudaDriver;

class Memory {
 public:
  virtual ~Memory() = default;
  virtual const char* name() const = 0;
  virtual ropegen_device device() const = 0;
  virtual void* stream() const = 0;  // what the call passes (NULL on the host)
  virtual void* allocate(size_t bytes) = 0;  // freed with the Memory (a scratch arena per case)
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  // Every byte set to `byte` (0xff: a NaN in every float type, so an
  // element a kernel does not write never passes the checks).
  virtual void fill(void* dst, uint8_t byte, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Frees everything allocated so far.
  virtual void release() = 0;
};

std::unique_ptr<Memory> host_memory();
std::unique_ptr<Memory> cuda_memory(const CudaDriver& driver);

}  // namespace kit
