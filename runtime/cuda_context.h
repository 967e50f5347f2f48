// Where CUDA kernels run: the device's primary context (the one the CUDA
// runtime, and so PyTorch, uses) and the call's stream. Halide's CUDA
// runtime would otherwise create a context of its own and launch on the
// legacy default stream, unordered with the caller's work; Halide 21's JIT
// lets each realize() say which context and stream through the
// JITUserContext it is given (JITHandlers::custom_cuda_acquire_context,
// custom_cuda_release_context, custom_cuda_get_stream: per call, nothing
// process-wide). Every CUDA call of a JIT kernel runs in one: device calls
// in their device's primary context on Call::stream, staged calls (host
// tensors) in device 0's on the legacy default stream, so the kernels'
// modules and Halide's own device buffers (constant tables) all live in
// primary contexts.
#pragma once

#include <Halide.h>

namespace ropegen::runtime {

// The primary context (a CUcontext) of device `ordinal`, retained on the
// device's first call, then kept for the process: it is shared with the
// caller, never reset. Throws DeviceError when the driver cannot give it.
void* primary_context(int ordinal);

// A realize()'s context that runs its kernels in `context` on `stream` (a
// CUstream of that context; nullptr: the legacy default stream).
class CudaCallContext : public Halide::JITUserContext {
 public:
  CudaCallContext(void* context, void* stream);

  void* context() const { return context_; }
  void* stream() const { return stream_; }

 private:
  void* context_ = nullptr;
  void* stream_ = nullptr;
};

// Halide 21's CUDA runtime loads the driver as "libcuda.so", which only the
// driver's development files provide; the driver installs libcuda.so.1. The
// JIT resolves that load through one process-wide handler (JITHandlers::
// custom_load_library has no per-call context: Halide::Internal::
// JITSharedRuntime::set_default_handlers). Once, before the first CUDA
// kernel, and only when no default handler is set already (the user's wins:
// set yours before rope-gen's first CUDA kernel to opt out), rope-gen sets
// one that loads every library exactly as Halide's default does (dlopen,
// RTLD_LAZY) and, when "libcuda.so" is not found, libcuda.so.1. Nothing else
// changes: other Halide JIT users in the process load what they loaded.
void find_libcuda_so_1();

}  // namespace ropegen::runtime
