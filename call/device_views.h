// What device runners (the JIT's, an AOT library's) do with a bound part's
// views before a launch, in one place: name every view as diagnostics do,
// and check the alignment CUDA kernels need.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "call/contract.h"
#include "call/parts.h"

namespace ropegen::call {

// Every buffer of a bound part with the name a diagnostic gives it (the
// call's argument names; rope outputs are their rotary dims).
template <typename F>
void for_each_view(BoundPart& part, const ropegen_contract& contract, F f) {
  const bool rope = is_rope(contract);
  for (abi::Arg a : abi::kTensorArgs) {
    RawBuffer& view = part.rope[a];
    if (!view.defined()) continue;
    const std::string name = abi::user_name(a, !rope);
    f(view, rope && (a == abi::Arg::OutQ || a == abi::Arg::OutK) ? name + " (its rotary dims)" : name);
  }
  for (PassThroughArguments& copy : part.pass_through) {
    f(copy.in, std::string(input_name(contract)) + " (its dims outside the rotary range)");
    f(copy.out, std::string(output_name(contract)) + " (its dims outside the rotary range)");
  }
}

// CUDA: the schedule moves q, k and the rotary parts of out_q and out_k in
// 16-byte vectors (targets/gpu_schedule.cpp) from their first elements; a
// misaligned address would be a fault that ruins the caller's context. Why
// the part cannot run, or nothing.
std::optional<std::string> cuda_misalignment(const BoundPart& part, const ropegen_contract& contract);

}  // namespace ropegen::call
