// Applying a spec to float32 host tensors (what `rope-gen apply` and the
// tests do): convert to the spec's dtype, run one ropegen::Call, convert
// back. Single-tensor encodings (sinusoidal, learned, ALiBi scores) pass
// their tensor as `q` (the library calls it "x").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ropegen/call.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::runtime {

struct HostTensor {
  std::vector<int64_t> shape;     // in the spec's layout
  std::vector<float> data;
};

struct HostCodes {
  std::vector<int64_t> shape;
  std::vector<uint8_t> codes;
};

struct HostPositions {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
  bool is_int64 = false;          // the kernel reads the ids in their own width
};

struct ApplyRequest {
  HostTensor q;
  std::optional<HostTensor> k;
  std::optional<HostPositions> positions;  // multi-axis: a trailing [n_axes] dim
  std::optional<HostTensor> table;         // learned: [max_len, dim]
  std::optional<HostTensor> freqs;         // frequency scheme runtime: [rotary_dim / 2]
  std::optional<HostTensor> cos_sin_cache; // frequency scheme table: [max_pos, rotary_dim], float32 as it is
  // Backward: q / k are the upstream gradients; with run-time frequencies
  // the forward inputs too, for dL/d(inv_freq).
  bool backward = false;
  std::optional<HostTensor> saved_q, saved_k;
  std::optional<std::vector<int64_t>> cu_seqlens;  // thd
  int64_t offset = 0;
  std::optional<int64_t> seq_len;                  // default: max position + 1
  std::string target = "host";
  // Fused KV-cache append (spec kv_cache): caches in float32, converted to
  // the cache dtype, updated and returned; indices are passed as int32.
  // out_k: whether rotated k is also returned (with a cache it is optional).
  bool out_k = true;
  std::optional<HostTensor> v, k_cache, v_cache;
  // fp8 caches (kv_cache dtype fp8_*): their uint8 codes instead of
  // k_cache, v_cache, returned updated; the call's scales (absent: 1).
  std::optional<HostCodes> k_cache_codes, v_cache_codes;
  std::optional<float> k_scale, v_scale;
  std::optional<std::vector<int64_t>> kv_indices, kv_indptr, batch_indices, slot_mapping;
  std::optional<std::vector<int64_t>> cache_positions;  // paged: where tokens go (absent: positions)
};

struct ApplyResult {
  std::vector<float> out_q;
  std::optional<std::vector<float>> out_k;
  std::optional<std::vector<float>> d_freqs;  // backward with run-time frequencies
  std::optional<std::vector<float>> k_cache, v_cache;  // updated (float32 of the cache dtype's values)
  std::optional<std::vector<uint8_t>> k_cache_codes, v_cache_codes;  // fp8 caches, updated
};

// A request as one ropegen::Call on host storage in the spec's dtype (ids
// in their width, cache indices int32), results allocated: what
// apply_on_host runs, and what the GPU kit (gpu_kit/) writes to its case
// files. Not copyable: the call points into its own storage.
class HostCall {
 public:
  static Result<std::unique_ptr<HostCall>> make(const RopeSpec& spec, const ApplyRequest& request);
  HostCall(const HostCall&) = delete;
  HostCall& operator=(const HostCall&) = delete;

  const Call& call() const { return call_; }
  ApplyResult results() const;  // the outputs as they are now

 private:
  struct Storage;
  HostCall();
  Call call_;
  std::unique_ptr<Storage> storage_;

 public:
  ~HostCall();
};

// The request as a HostCall run through Runtime::process() (so prepare_call
// checks it, and the kernel cache serves it).
Result<ApplyResult> apply_on_host(const RopeSpec& spec, const ApplyRequest& request);

}  // namespace ropegen::runtime
