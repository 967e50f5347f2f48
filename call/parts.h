// A prepared call as the halide_buffer_t arguments of a spec's pipelines.
//
// Halide's buffers hold 32-bit extents and strides, and a kernel built
// without LargeBuffers addresses at most 2^31-1 elements per argument: a
// call whose tensors are larger or further apart is cut over its batches,
// then its tokens, into parts that fit, each part's data pointer moved in
// 64 bits (its mins are the part's first token and batch, so positions,
// offsets and cu_seqlens mean what they meant).
//
// Each part is then bound to a pipeline's arguments (bind_part): rope
// writes the rotary part of its outputs through a strided view (half:
// (r, m, h, s, b) with m's stride rotary_dim/2; interleaved: (m, r, h, s, b)
// with r's stride 2), and out of place a partial-rotary spec copies the
// other dims (pass_in -> pass_out). Arguments are found by the names
// lowering gives them, for the JIT and the compiled entry points alike.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include <HalideRuntime.h>

#include "call/fixed_vector.h"
#include "call/prepare_call.h"

namespace ropegen::call {

// A halide_buffer_t with room for its dims (up to 5), not owning its data:
// a host view (`host`), or for a device call a device-only view (`host`
// null, `device` the address of its first element, `device_interface` the
// runner's; see part_views). Copied several times per call (views, then a
// pipeline's arguments): the copy is inline, a fixed-size block the
// compiler moves in a few vector stores.
class RawBuffer {
 public:
  RawBuffer() { buf.dim = dim; }
  RawBuffer(const RawBuffer& o) { *this = o; }
  RawBuffer& operator=(const RawBuffer& o) {
    buf = o.buf;
    std::memcpy(dim, o.dim, sizeof dim);
    buf.dim = dim;  // our own dims, not o's
    return *this;
  }
  // A buffer of another owner (a Halide::Buffer's raw_buffer()), its host side.
  static RawBuffer of(const halide_buffer_t& b);

  bool defined() const { return buf.dimensions > 0; }
  // Where the first element is, host or device.
  uint64_t address() const { return buf.device_interface ? buf.device : reinterpret_cast<uintptr_t>(buf.host); }
  halide_buffer_t* get() { return &buf; }
  const halide_buffer_t* get() const { return &buf; }

  halide_buffer_t buf{};
  halide_dimension_t dim[5]{};
};

// The type a kernel's buffer has for a tensor of `type` (bfloat16: uint16 bit patterns).
halide_type_t halide_type(ElementType type);

// Tokens [s0, s0 + ns) of batches [b0, b0 + nb).
struct CallPart {
  int64_t s0, ns, b0, nb;
};

// The parts a prepared call is cut into (one when it fits whole; none when
// it is empty).
std::vector<CallPart> plan_parts(const PreparedCall& call);
// The whole call as one part, when it is not empty and fits one (what
// nearly every call is: run_in_parts then plans nothing).
std::optional<CallPart> single_part(const PreparedCall& call);

// One part's logical buffers: rows (d, h, s, b) and ids with the part's
// mins (abi::ArgKind::Rows, Ids); the rest whole.
//
// A device call's buffers are device-only views of the caller's memory,
// never copied: `device` = the address of the view's first element (the
// tensor's data moved by the part's and the view's byte offsets), strides
// as given, `device_interface` = `device_interface`: the Halide runtime's
// that runs the kernels (the JIT's and an AOT library's differ), for the
// call's device API; null for host calls. CUDA kernels address memory from
// `device` like host ones from `host`; Vulkan device handles are not
// addresses, so a Vulkan runner replaces each `device` by a handle of its
// own before the launch (runtime/device_memory.h).
struct PartViews {
  abi::ByTensor<RawBuffer> buffers;  // by argument; undefined: not given
  abi::Scalars scalars;
  RawBuffer& operator[](abi::Arg a) { return buffers[a]; }
  const RawBuffer& operator[](abi::Arg a) const { return buffers[a]; }
};
PartViews part_views(const PreparedCall& call, const CallPart& part, const halide_device_interface_t* device_interface);

// The views a kernel writes and copies (contract: the kernel's,
// kernel_contract()).
RawBuffer rotary_view(const RawBuffer& logical, const ropegen_contract& contract);
RawBuffer dim_range_view(const RawBuffer& logical, int first, int count);
// The dim ranges outside the rotary part: (first, count), nonempty only.
using DimRanges = FixedVector<std::pair<int, int>, 2>;
DimRanges pass_through_ranges(const ropegen_contract& contract);

// One part as a pipeline's arguments: its views, but out_q and out_k as
// the kernel writes them (rope: rotary views; out_k only with k). The
// outputs are out_q, out_k, the summed gradients and, updated in place, k_cache and
// v_cache ((d, h, entry, page)).
struct RopeArguments : PartViews {};
struct PassThroughArguments {
  RawBuffer in, out;
};
struct BoundPart {
  RopeArguments rope;
  std::vector<PassThroughArguments> pass_through;  // out of place, partial rotary
};
BoundPart bind_part(const ropegen_contract& kernel_contract, const KernelVariant& variant, const PartViews& part);

// Where an argument of a compiled pipeline comes from, by the name lowering
// gave it (Halide may add a `$n` tail to an output's name): a call
// argument (abi/arguments.h; pool_threads is the entry's runtime's, not the
// call's), Halide's __user_context, or a pass-through copy's buffer.
struct ArgumentSource {
  std::optional<abi::Arg> arg;
  RawBuffer PassThroughArguments::*copy_buffer = nullptr;
  bool user_context = false;  // GPU entries of AOT libraries: call/device_context.h
};
std::optional<ArgumentSource> rope_argument(std::string_view name);
std::optional<ArgumentSource> pass_through_argument(std::string_view name);

// Runs every part of `call` (none when it is empty), summing each part's
// summed gradients (dL/d(inv_freq), the qk_norm weights') into the call's
// (zeroed first; a device call has one part, whose kernel writes all of
// it: prepare_call). `device_interface`
// as part_views takes it: the runner's for the call's device API (a device
// call's runner checks that it has one), null for host calls. A template,
// not a std::function: the argv path's captures would be a heap allocation
// per call.
//
// Per-call cost (issue 16; llama3-8B bf16 decode, q 32 + k 8 heads, `rope-gen
// bench --threads 1 --positions random`, disk-cached kernel, medians of 3 on
// one 2-core machine): 1 token 1.68 -> 1.12 us, 64 tokens 17.40 -> 16.79 us.
// A loop over the same 1-token call: prepare_call 610 -> 265 ns, part views
// and binding 326 -> 139 ns. Most of what remains of a 1-token call is the
// Halide kernel's own (its parallel loop) and copies of the ~20 views.
template <typename RunPart>
void run_in_parts(const PreparedCall& call, const halide_device_interface_t* device_interface, RunPart&& run_part) {
  const halide_device_interface_t* device = call.on_device() ? device_interface : nullptr;
  // The summed gradients a host call writes: zeroed, then each part's added.
  FixedVector<abi::Arg, 3> summed;
  for (abi::Arg a : abi::kTensorArgs)
    if (abi::is_summed_gradient(a) && !call.on_device() && call[a].defined()) summed.push_back(a);
  auto values = [&](abi::Arg a) { return static_cast<float*>(call[a].data); };
  for (abi::Arg a : summed) std::fill(values(a), values(a) + call[a].extent[0], 0.0f);
  if (const std::optional<CallPart> whole = single_part(call)) return run_part(part_views(call, *whole, device));
  for (const CallPart& p : plan_parts(call)) {
    PartViews part = part_views(call, p, device);
    std::array<std::vector<float>, 3> sums;
    for (size_t n = 0; n < summed.size(); ++n) {
      sums[n].resize(static_cast<size_t>(call[summed[n]].extent[0]));
      part[summed[n]].buf.host = reinterpret_cast<uint8_t*>(sums[n].data());
    }
    run_part(part);
    for (size_t n = 0; n < summed.size(); ++n)
      for (size_t i = 0; i < sums[n].size(); ++i) values(summed[n])[i] += sums[n][i];
  }
}

}  // namespace ropegen::call
