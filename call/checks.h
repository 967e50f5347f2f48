// The checks of one call (prepare_call.cpp runs them in order), one file
// per feature: tensor_checks (devices, dtypes, data, q / k / outputs),
// position_checks (ids, cu_seqlens, the range of positions),
// frequency_checks (learned table, run-time frequencies, cos/sin cache),
// kv_checks (the fused KV-cache append), gradient_checks (backward's saved
// inputs), call_views (the kernels' views and their memory). They share a
// CheckContext; every message names the argument (abi/arguments.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "abi/arguments.h"
#include "abi/kernel_abi.h"
#include "call/contract.h"
#include "call/fixed_vector.h"
#include "call/prepare_call.h"
#include "ropegen/diagnostics.h"

namespace ropegen::call {

using abi::Arg;

Shape shape_of(const Tensor& t);
std::string shape_str(const Shape& s);
std::string shape_str(const Tensor& t);

// Element i (row-major over the shape) of an int32 or int64 tensor on the host.
int64_t id_at(const Tensor& t, int64_t i);

struct PositionRange {
  int64_t first = 0, last = 0;  // the smallest and largest position read
};
// The smallest and largest of n > 0 ids.
PositionRange id_range(const Tensor& t, int64_t n);

struct CheckContext {
  CheckContext(const ropegen_contract& contract, const Call& call);

  const ropegen_contract& c;
  const Call& call;
  const abi::LayoutTraits& traits;  // of the call's tensors
  bool single_tensor;               // sinusoidal, learned, alibi: q is "x", out_q "out"
  // q and k, and where their results go (absent out_q, out_k: in place,
  // except that a kv_cache spec writes k only into the cache without out_k).
  Tensor q, out_q;
  std::optional<Tensor> k, out_k;
  Shape tokens;         // q's token dims
  PositionRange range;  // of the positions the call reads, once range_known
  bool range_known = false;
  bool on_device = false;          // every tensor on one CUDA or Vulkan device
  std::vector<int32_t> placement;  // paged KV caches: each token's cache position
  std::vector<Diagnostic> errors;

  // The tensor the call gives for `a` (q, out_q, k, out_k as above), or null.
  const Tensor* tensor(Arg a) const;
  const std::optional<Tensor>& given(Arg a) const { return call.*abi::info(a).call_tensor; }
  const char* name(Arg a) const { return abi::user_name(a, single_tensor); }
  void fail(const std::string& what, std::string message) { errors.push_back(named_error(what, std::move(message))); }
  bool ok() const { return errors.empty(); }
  int64_t sequence_tokens() const { return q.shape[traits.s]; }
};

// tensor_checks.cpp
void check_devices(CheckContext& x);
void check_dtypes(CheckContext& x);
void check_data(CheckContext& x);
void check_tensors(CheckContext& x);
// position_checks.cpp
void check_positions(CheckContext& x);
void check_cu_seqlens(CheckContext& x);
void check_seq_len(CheckContext& x);
void check_position_range(CheckContext& x);
// Whether the kernels read cu_seqlens: packed layouts with implicit positions.
bool kernel_reads_cu_seqlens(const CheckContext& x);
// frequency_checks.cpp
void check_table(CheckContext& x);
void check_cos_sin_cache(CheckContext& x);
void check_freqs(CheckContext& x);
// kv_checks.cpp
void check_kv_cache(CheckContext& x);
// gradient_checks.cpp
void check_backward(CheckContext& x);
// norm_checks.cpp
void check_norm_weights(CheckContext& x);
// fp8_checks.cpp: fp8 outputs out of place (before the dtypes, which an
// absent output would fail as q's), and every scale: fp8 scalars and
// output_quant's out_scales (after the tensors' checks).
void check_fp8_outputs(CheckContext& x);
void check_scales(CheckContext& x);
// call_views.cpp: the views of a call that passed the checks, and their memory.
void build_views(CheckContext& x, PreparedCall& p);
void check_memory_of_views(CheckContext& x, const PreparedCall& p);

}  // namespace ropegen::call
