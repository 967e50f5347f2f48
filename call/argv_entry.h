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
};

// A diagnostic (naming `where`) when an argument is one rope-gen does not bind.
Result<ArgvEntry> resolve_entry(const std::string& where, const std::string& name, ArgvFunction argv,
                                const halide_filter_metadata_t* metadata, bool pass_through);

// Every part of a prepared call through its entries (kernel_contract as
// bind_part takes it; device_interface as run_in_parts takes it: the
// entries' runtime's for a device call). `user_context` is what entries
// compiled with Target::UserContext get (their metadata's __user_context
// argument). Returns the first nonzero Halide error code.
int run_prepared(const ropegen_contract& kernel_contract, const PreparedCall& call,
                 const halide_device_interface_t* device_interface, const ArgvEntry& rope,
                 const ArgvEntry* pass_through, const ArgvEntry** failed, void* user_context = nullptr);

}  // namespace ropegen::call
