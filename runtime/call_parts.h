// A RopeCall as the Halide buffers its kernels take, checked first.
//
// The tensors' memory: every extent, stride and address computed in 64
// bits with overflow checks; an output may not overlap an input or another
// output unless it is exactly its own input (in place: same data, shape and
// strides), nor overlap itself — a kernel would read what it already wrote.
// Byte ranges [lowest, highest] decide, except for views side by side in
// one larger tensor (fused qkv: q's and k's heads of each token), which
// share no element though their ranges interleave.
//
// Halide's buffers hold 32-bit extents and strides, and a kernel built
// without LargeBuffers addresses at most 2^31-1 elements per argument: a
// call whose tensors are larger or further apart is cut over its batches,
// then its tokens, into parts that fit, each part's data pointer moved in
// 64 bits (its mins are the part's first token and batch, so positions mean
// what they meant). Only a single row (one token's heads) that does not fit
// is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ropegen/result.h"
#include "ropegen/spec.h"
#include "runtime/call_binding.h"
#include "runtime/kernel.h"

namespace ropegen::runtime {

// The most elements one kernel argument may address.
inline constexpr int64_t kMaxKernelSpan = INT32_MAX;

// Tokens [s0, s0 + ns) of batches [b0, b0 + nb).
struct CallPart {
  int64_t s0, ns, b0, nb;
};

// Every problem with the call's memory, naming the tensors as the user
// knows them (q, k, out_q, out_k; x and out for the other encodings).
std::vector<Diagnostic> check_tensors(const RopeSpec& spec, const RopeCall& call);

// The parts a checked, non-empty call is cut into (one when it fits whole).
std::vector<CallPart> plan_parts(const RopeCall& call);

// One part as Halide buffers (positions cropped to it; d_freqs as given).
BufferCall part_of(const RopeCall& call, const CallPart& part);

// check_tensors (throws std::invalid_argument with its messages), then
// run_part on every part, summing their dL/d(inv_freq) into call.d_freqs.
// An empty call (a zero extent) runs nothing; its d_freqs are zeroed.
void run_in_parts(const RopeSpec& spec, const RopeCall& call, const std::function<void(const BufferCall&)>& run_part);

}  // namespace ropegen::runtime
