// Compiled entry points called through Halide's `<fn>_argv` form, their
// arguments resolved once by the names `<fn>_metadata` lists: the kernels
// the disk cache loads and the AOT libraries' C entry call them alike.
#pragma once

#include <string>
#include <vector>

#include "call/parts.h"
#include "ropegen/result.h"

namespace ropegen::call {

using ArgvFunction = int (*)(void**);

struct ArgvEntry {
  std::string name;
  ArgvFunction argv = nullptr;
  std::vector<ArgumentSource> sources;  // in call order
  // The halide_get_num_threads of the runtime the entry runs on, for its
  // pool_threads argument (null: 1). 0 until the pool's first parallel loop.
  int (*pool_threads)() = nullptr;
};

// A diagnostic (naming `where`) when an argument is one rope-gen does not
// bind. pool_threads: ArgvEntry::pool_threads.
Result<ArgvEntry> resolve_entry(const std::string& where, const std::string& name, ArgvFunction argv,
                                const halide_filter_metadata_t* metadata, bool pass_through,
                                int (*pool_threads)() = nullptr);

// One call of an entry on buffers of another owner (the device staging's
// Halide::Buffers, which must see what the entry leaves in them: device
// allocations, dirty bits). Tensors and scalars by argument (null: not
// given); rope's pool_threads is set from the entry's runtime. Halide's
// error code (0: success).
int call_rope(const ArgvEntry& rope, const abi::ByTensor<halide_buffer_t*>& tensors, abi::Scalars& scalars,
              void* user_context);
int call_copy(const ArgvEntry& copy, halide_buffer_t* in, halide_buffer_t* out, void* user_context);

// What a device call's launches through an AOT library's GPU entries need
// beyond their views (call/library_run.cpp).
class DeviceLaunch {
 public:
  virtual ~DeviceLaunch() = default;
  // What the entries get as __user_context (Target::UserContext).
  virtual void* user_context() = 0;
  // Before a part is launched, on its bound views: checks, and on Vulkan
  // device handles of the entries' runtime in place of addresses. false
  // stops the call (the launch keeps why).
  virtual bool prepare(BoundPart& part) = 0;
  // After the part's launch (or a failed prepare): what prepare made, released.
  virtual void release() = 0;
};

// Every part of a prepared call through its entries (kernel_contract as
// bind_part takes it; device_interface as run_in_parts takes it: the
// entries' runtime's for a device call; `launch` for an AOT library's GPU
// entries). Returns the first nonzero Halide error code, or -1 when
// launch->prepare refused a part (nothing of it ran).
int run_prepared(const ropegen_contract& kernel_contract, const PreparedCall& call,
                 const halide_device_interface_t* device_interface, const ArgvEntry& rope,
                 const ArgvEntry* pass_through, const ArgvEntry** failed, DeviceLaunch* launch = nullptr);

}  // namespace ropegen::call
