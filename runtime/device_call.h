// One part of a call (DevicePart) on a GPU target, from and to the caller's host memory.
// Halide's GPU pipelines take host buffers and copy them to the device
// themselves, but not as they are:
//  - Halide 21's Vulkan allocator mis-sizes buffers whose size is not a
//    multiple of the device's alignment (short copies, failed
//    allocations: halide/Halide#9223, fixed after 21);
//  - a Vulkan kernel argument may span at most maxStorageBufferRange
//    (128 MiB on lavapipe) — a q of several hundred MiB must be split;
//  - the caller's tensors are strided views (bhsd, fused qkv slices,
//    the rotary part of a row), copied element run by element run.
// So every call is staged: tokens are split into parts that fit the
// device's limit, each part is gathered into dense host buffers (padded
// with whole tokens to the size multiple), which Halide copies to the
// device in one piece each; the pipelines write dense outputs, copied
// back and scattered into the caller's tensors. Coordinates are the
// caller's (staged buffers keep the part's token and batch mins), so
// positions, offsets and cu_seqlens mean what they meant.
#pragma once

#include <functional>
#include <stdexcept>

#include "call/prepare_call.h"
#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"
#include "runtime/device_probe.h"
#include "runtime/kernel.h"
#include "runtime/pipeline_arguments.h"

namespace ropegen::runtime {

// What failed on the device (allocation, copy, launch): a user-facing
// message naming the device, not a bug in rope-gen.
class DeviceError : public KernelFailure {
 public:
  using KernelFailure::KernelFailure;
};

// One part of a call (call::PartViews, wrapped by pipeline_arguments.h's
// wrap) as Halide buffers: tensors (d, h, s, b) with the part's mins,
// positions cropped to it, the rest whole; out_q and out_k whole tensors
// (the staging below writes their rotary part).
using DevicePart = PipelineArguments;

struct DevicePipelines {
  std::function<void(const PipelineArguments&)> rope;          // realizes out_q (, out_k)
  std::function<void(const PipelineCopy&)> pass;   // realizes pass_out; empty without partial rotary
  // What the staging's own calls into Halide's runtime (copies back, frees)
  // are given, as the pipelines: CUDA's context and stream
  // (runtime/cuda_context.h); null for Vulkan.
  Halide::JITUserContext* context = nullptr;
};

// Once per process, before Halide's GPU runtime first runs. CUDA: Halide
// finds libcuda.so.1 (runtime/cuda_context.h: find_libcuda_so_1). Vulkan: Halide 21's
// Vulkan allocator sizes regions inconsistently unless every size rounds to
// a multiple at least the device's alignment: device copies then overrun
// their regions (on lavapipe, whose device memory is the host heap: heap
// corruption after a few dozen kernels, measured). HL_VK_ALLOC_CONFIG's
// last field sets that multiple (256, as the staged buffers).
//
// This is the one environment variable rope-gen sets, once, before its first
// Vulkan kernel, and only when HL_VK_ALLOC_CONFIG is unset: Halide 21 reads
// the allocator settings from the environment when its Vulkan runtime first
// creates a context, and offers no per-pipeline or JITHandlers hook for them
// (its runtime's halide_vulkan_set_alloc_config is not in the public headers
// and would be process-wide anyway). To opt out, set HL_VK_ALLOC_CONFIG
// yourself (empty: Halide's defaults); keep a last field that is a multiple
// of 256, or Vulkan calls may overrun their regions as above.
void prepare_device_runtime(const Halide::Target& target);

// How many parts run_on_device has staged in this process (device calls,
// which are never staged, leave it as it was: the tests check).
uint64_t staged_parts();

// How many launches (parts) run_on_device splits `call` into.
int device_parts(const RopeSpec& spec, const lowering::KernelVariant& variant, const DevicePart& call,
                 const DeviceInfo& device);

// Runs `call` (prepared: call/prepare_call.h) through
// `pipelines` compiled for a GPU target of `device`. Throws DeviceError.
void run_on_device(const RopeSpec& spec, const lowering::KernelVariant& variant, const DevicePart& call,
                   const DeviceInfo& device, const DevicePipelines& pipelines);

// A host call on GPU target `target`: each of its parts (call::run_in_parts)
// through run_on_device, after prepare_device_runtime. `spec` is the
// kernel's (lowering::kernel_spec). Throws DeviceError.
void run_staged(const call::PreparedCall& call, const RopeSpec& spec, const lowering::KernelVariant& variant,
                const Halide::Target& target, const DevicePipelines& pipelines);

}  // namespace ropegen::runtime
