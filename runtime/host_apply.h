// Applying a spec to host arrays (what `rope-gen apply`, the GPU kit's
// case writer and the tests do): each argument converted by its row of the
// argument table (abi/arguments.h) into the spec's storage, one
// ropegen::Call run, the outputs converted back. Single-tensor encodings
// (sinusoidal, learned, ALiBi scores) pass their tensor as q (the library
// calls it "x").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "abi/arguments.h"
#include "ropegen/call.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::runtime {

// An argument's values on the host, as a .npy file holds them.
struct HostArray {
  std::vector<int64_t> shape;
  // Float32: `floats`; Int32 / Int64: `ints` (ids are passed in that width);
  // UInt8: `codes` (fp8 caches).
  ElementType type = ElementType::Float32;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<uint8_t> codes;

  static HostArray of_floats(std::vector<int64_t> shape, std::vector<float> values);
  static HostArray of_ids(std::vector<int64_t> shape, std::vector<int64_t> values, bool int64 = true);
  static HostArray of_codes(std::vector<int64_t> shape, std::vector<uint8_t> codes);
  int64_t elements() const;
};

struct ApplyRequest {
  // The call's tensors by argument, converted by their dtype rule: float32
  // values to the spec's dtype (q, k, v, table, saved inputs) or passed as
  // they are (freqs, the cos/sin cache); ids in their width; cache indices
  // narrowed to int32 (an index outside int32 is refused naming its
  // tensor); KV caches to the kv_cache dtype (fp8: their codes as they
  // are), updated and returned. Outputs (out_q, out_k, d_freqs) are made
  // here, shaped like their inputs.
  abi::ByTensor<std::optional<HostArray>> tensors;
  int64_t offset = 0;
  std::optional<int64_t> seq_len;  // default: max position + 1
  std::optional<float> q_scale, k_scale, v_scale;
  bool backward = false;  // q, k: upstream gradients; with run-time frequencies also dL/d(inv_freq)
  // kv_cache specs: whether rotated k is also returned (with a cache it is optional).
  bool out_k = true;
  std::string target = "host";

  std::optional<HostArray>& operator[](abi::Arg a) { return tensors[a]; }
  const std::optional<HostArray>& operator[](abi::Arg a) const { return tensors[a]; }
};

struct ApplyResult {
  // out_q, out_k (when returned), d_freqs (backward of run-time
  // frequencies), and the KV caches as updated: float32 of the stored
  // values (fp8 caches and outputs: their codes).
  abi::ByTensor<std::optional<HostArray>> outputs;

  std::optional<HostArray>& operator[](abi::Arg a) { return outputs[a]; }
  const std::optional<HostArray>& operator[](abi::Arg a) const { return outputs[a]; }
  const std::vector<float>& out_q() const { return outputs[abi::Arg::OutQ]->floats; }
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
