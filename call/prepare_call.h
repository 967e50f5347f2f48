// prepare_call: the one place a call is checked against its spec and turned
// into the kernels' views. Every caller goes through it (Runtime's kernels,
// hence the CLI, Python, bench and the tests; the AOT C entry).
//
// Checked, with messages naming the argument and the fix: dtypes and
// devices; shapes (rank, the spec's row dim, k like q but for its heads,
// outputs like their inputs, ALiBi's heads); position ids (shape, width)
// or their absence; cu_seqlens; seq_len; every position in 0..2^32; the
// learned table (shape, rows for every position); the fused KV-cache
// append (v, caches and their layout's shapes and dtype, index tensors,
// every page and slot a token goes to in range, kv_indptr monotone and
// within kv_indices, each token's position within its request's pages, no
// two tokens to one entry; fp8 caches' k_scale, v_scale finite and > 0,
// and no scale for other caches); the cos/sin cache of
// frequency scheme table (float32 [max_pos, rotary_dim], last dim
// contiguous, a row for every position); run-time frequencies
// (shape, finite, at most kMaxInvFreq); backward's saved inputs; the memory
// (every span and address in 64 bits without overflow, contiguous rows; an
// output is exactly its own input (in place) or overlaps nothing — views
// side by side in one tensor, fused qkv, are fine); and what one kernel
// argument can address (2^31-1 elements: larger calls are cut into parts,
// only a single token too spread out is refused).
//
// Device calls (every tensor on one CUDA or Vulkan device; a tensor on
// another device, the CPU included, is refused naming it): shapes, dtypes,
// strides and the memory checks above are the same (they read no tensor),
// but values in device memory cannot be read without synchronising with the
// device, which a call never does. So position ids, cu_seqlens, run-time
// frequencies, kv_indices, kv_indptr, batch_indices, cache_positions and
// slot_mapping of a device call are the caller's to keep valid, as with
// FlashInfer's and vLLM's kernels: an id out of range gives wrong values
// but the kernels touch nothing outside the call's tensors (ids are
// clamped to them). What needs a value is asked of the caller instead:
// packed layouts with implicit positions need int32 cu_seqlens; a paged
// KV-cache append needs int32 positions or cache_positions; seq_len is not
// derived from positions (a kernel whose frequencies depend on it refuses a
// call that does not give it: PreparedCall::seq_len_known). A device call
// that needs several kernel calls (call/parts.h) cannot sum dL/d(inv_freq)
// across them on the host and is refused.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "abi/arguments.h"
#include "abi/kernel_abi.h"
#include "call/fixed_vector.h"
#include "ropegen/call.h"
#include "ropegen/result.h"
#include "ropegen/ropegen_aot.h"
#include "ropegen/spec.h"

namespace ropegen::call {

// A tensor as the kernels see it, extents and strides in elements, 64-bit
// (abi/arguments.h's shape rules): rows (d, h, s, b); ids (s, b) or
// multi-axis (axis, s, b); a learned table or a cos/sin cache (column,
// row); caches (d, h, entry, page); vectors (i).
struct View {
  void* data = nullptr;  // device calls: the device address (never read on the host)
  ElementType type = ElementType::Float32;
  int dims = 0;  // 0: not given
  std::array<int64_t, 4> extent{}, stride{};

  bool defined() const { return dims > 0; }
  bool empty() const;  // an extent is 0
};

struct PreparedCall {
  ropegen_contract contract{};  // the spec's
  KernelVariant variant;
  Device device;        // every tensor's
  void* stream = nullptr;
  // Every tensor argument's view (undefined: not given). q is x (and out_q
  // out) for the single-tensor encodings; out_q, out_k are q, k in place.
  // Paged caches' cache_positions is each token's position in its request's
  // pages (the call's cache_positions, else its positions; host calls:
  // owned_cache_positions); packed layouts' cu_seqlens int32 starts.
  abi::ByTensor<View> views;
  // offset, seq_len (max position + 1 unless given), k_scale, v_scale (1
  // unless given); pool_threads is the runner's.
  abi::Scalars scalars;
  // false: a device call without seq_len whose positions are on the device
  // (seq_len is then 1): a kernel that reads seq_len refuses it.
  bool seq_len_known = true;

  PreparedCall() = default;
  PreparedCall(PreparedCall&&) = default;
  PreparedCall& operator=(PreparedCall&&) = default;
  PreparedCall(const PreparedCall&) = delete;  // cu_seqlens, cache_positions point into owned_*

  // Host calls only (device calls use the caller's int32 tensors):
  std::vector<int32_t> owned_cu_seqlens;  // int32 starts when the caller gave int64 ones or none
  std::vector<int32_t> owned_cache_positions;
  abi::ByTensor<std::vector<int32_t>> owned_indices;  // int64 cache indices, narrowed once checked

  View& operator[](abi::Arg a) { return views[a]; }
  const View& operator[](abi::Arg a) const { return views[a]; }
  bool on_device() const { return device.type != DeviceType::CPU; }
};

// A shape by value (no allocation: calls compare several).
using Shape = FixedVector<int64_t, kMaxRank>;
// The shape positions have: the token dims in the layout's order ([B, S],
// [S, B], [T]).
Shape token_dims(const abi::LayoutTraits& layout, const int64_t* shape);

Result<PreparedCall> prepare_call(const ropegen_contract& contract, const Call& call);
Result<PreparedCall> prepare_call(const RopeSpec& spec, const Call& call);

// The names a spec's arguments have for its users: q/k/out_q/out_k for rope,
// x/out for the single-tensor encodings.
const char* input_name(const ropegen_contract& c);
const char* output_name(const ropegen_contract& c);

}  // namespace ropegen::call
