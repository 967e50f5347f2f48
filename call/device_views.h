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
  static const char* const kArguments[] = {"q",          "k",         "v",             "positions",    "cu_seqlens",
                                           "table",      "freqs",     "cos_sin_cache", "saved_q",      "saved_k",
                                           "out_q",      "out_k",     "k_cache",       "v_cache",      "d_freqs",
                                           "kv_indices", "kv_indptr", "batch_indices", "slot_mapping", "cache_positions"};
  const bool rope = is_rope(contract);
  for (const char* argument : kArguments) {
    RawBuffer& view = part.rope.*(rope_argument(argument)->rope_buffer);
    if (!view.defined()) continue;
    const std::string_view a = argument;
    if (a == "q") f(view, std::string(input_name(contract)));
    else if (a == "out_q") f(view, std::string(rope ? "out_q (its rotary dims)" : output_name(contract)));
    else if (a == "out_k") f(view, std::string("out_k (its rotary dims)"));
    else f(view, std::string(argument));
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
