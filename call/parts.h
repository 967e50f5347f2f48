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

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include <HalideRuntime.h>

#include "call/prepare_call.h"

namespace ropegen::call {

// A halide_buffer_t with room for its dims (up to 5), no device, not owning
// its data.
class RawBuffer {
 public:
  RawBuffer() { buf.dim = dim; }
  RawBuffer(const RawBuffer& o) { *this = o; }
  RawBuffer& operator=(const RawBuffer& o);
  // A buffer of another owner (a Halide::Buffer's raw_buffer()), its host side.
  static RawBuffer of(const halide_buffer_t& b);

  bool defined() const { return buf.dimensions > 0; }
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

// One part's logical buffers: tensors (d, h, s, b) with the part's mins;
// positions cropped to it; cu_seqlens, table, frequencies and the cos/sin
// cache whole.
struct PartViews {
  RawBuffer q, out_q, k, out_k, saved_q, saved_k;
  RawBuffer positions, cu_seqlens, table, freqs, cos_sin_cache, d_freqs;
  // KV-cache append (always one part): v like k; caches and indices whole.
  RawBuffer v, k_cache, v_cache, kv_indices, kv_indptr, batch_indices, slot_mapping, cache_positions;
  int64_t offset = 0, seq_len = 1;
  float k_scale = 1.0f, v_scale = 1.0f;  // fp8 caches
};
PartViews part_views(const PreparedCall& call, const CallPart& part);

// The views a kernel writes and copies (contract: the kernel's,
// kernel_contract()).
RawBuffer rotary_view(const RawBuffer& logical, const ropegen_contract& contract);
RawBuffer dim_range_view(const RawBuffer& logical, int first, int count);
// The dim ranges outside the rotary part: (first, count), nonempty only.
std::vector<std::pair<int, int>> pass_through_ranges(const ropegen_contract& contract);

// One part as a pipeline's arguments.
struct RopeArguments {
  RawBuffer q, k, positions, cu_seqlens, table, freqs, cos_sin_cache, saved_q, saved_k;
  RawBuffer v, kv_indices, kv_indptr, batch_indices, slot_mapping, cache_positions;
  int64_t offset = 0, seq_len = 1;
  float k_scale = 1.0f, v_scale = 1.0f;
  RawBuffer out_q, out_k, d_freqs;  // outputs: rotary views (rope) or the whole tensor
  RawBuffer k_cache, v_cache;       // outputs updated in place: (d, h, entry, page)
};
struct PassThroughArguments {
  RawBuffer in, out;
};
struct BoundPart {
  RopeArguments rope;
  std::vector<PassThroughArguments> pass_through;  // out of place, partial rotary
};
BoundPart bind_part(const ropegen_contract& kernel_contract, const KernelVariant& variant, const PartViews& part);

// Where an argument of a compiled pipeline comes from, by the name lowering
// gave it (Halide may add a `$n` tail to an output's name).
struct ArgumentSource {
  RawBuffer RopeArguments::*rope_buffer = nullptr;
  int64_t RopeArguments::*rope_scalar = nullptr;       // int64 scalars
  float RopeArguments::*rope_float = nullptr;          // float32 scalars
  RawBuffer PassThroughArguments::*copy_buffer = nullptr;
};
std::optional<ArgumentSource> rope_argument(std::string_view name);
std::optional<ArgumentSource> pass_through_argument(std::string_view name);

// Runs every part of `call` (none when it is empty), summing each part's
// dL/d(inv_freq) into call.d_freqs (zeroed first).
void run_in_parts(const PreparedCall& call, const std::function<void(const PartViews&)>& run_part);

}  // namespace ropegen::call
