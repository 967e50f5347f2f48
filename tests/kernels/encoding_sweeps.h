// Sweeps over the encodings beyond 1-D RoPE forward (sinusoidal, learned,
// ALiBi, multi-axis RoPE, run-time frequencies, backward kernels), run
// through runtime::apply_on_host on a target and checked against the
// float64 reference (tests/support). Each case prints its spec, so a
// failure names the exact combination; GPU tests also compare every
// output with the host's, bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kernel_case.h"
#include "runtime/host_apply.h"

namespace ropegen::test {

struct EncodingCase {
  std::string spec;                  // YAML
  runtime::ApplyRequest request;     // target filled in by run_encoding_case
  std::string describe() const;
};

// A kernel sweep's case (kernel_case.h) as a request: its spec and
// deterministic inputs (its in_place flag is the caller's to apply).
EncodingCase as_encoding_case(const Case& c);

std::vector<EncodingCase> sweep_sinusoidal_and_learned();
std::vector<EncodingCase> sweep_alibi();
std::vector<EncodingCase> sweep_multi_axis_rope();
// Backward of rope specs (partial, interleaved, output_pairing, xPos, yarn,
// multi-axis) and run-time frequencies forward and backward (dL/d(inv_freq)).
std::vector<EncodingCase> sweep_backward_and_runtime_frequencies();
// Frequency scheme table (cos/sin read from the call's cos_sin_cache, each
// cache the reference's table of a computing spec: llama3, yarn, longrope):
// layouts x pairings x dtypes on a partial range, explicit int32 / int64
// ids, backward, q alone, odd sizes, DeepSeek-V3's output pairing, multi-axis.
std::vector<EncodingCase> sweep_cos_sin_cache();

// The reference's cos/sin cache of a computing spec (YAML): float32
// [rows, rotary_dim], rows for positions 0 .. rows-1.
runtime::HostArray reference_cache(const std::string& source, int64_t rows);

// The float64 reference's outputs of a case: out_q (x, scores), out_k,
// and the gradients summed over rows: dL/d(inv_freq) for backward with
// run-time frequencies, the weights' for backward with qk_norm weights.
struct ReferenceOutputs {
  std::vector<double> out_q;
  std::optional<std::vector<double>> out_k, d_freqs, d_q_norm_weight, d_k_norm_weight;
};
ReferenceOutputs reference_outputs(const EncodingCase& c);

// |kernel - reference| allowed for a stored output of `dtype` (float32 math
// on stored inputs, one rounding on store); d_freqs, a sum over every row,
// is allowed kSumTolerance times the float32 one.
double tolerance(DType dtype, double want);
inline constexpr double kSumTolerance = 10.0;

// Runs c on `target` (host, vulkan, cuda) and checks every output against
// the reference (gtest failures). Returns the outputs, empty if it could not run.
std::optional<runtime::ApplyResult> run_encoding_case(const EncodingCase& c, const std::string& target);

// Every case on `target` against the reference; with `against_host`, also
// on the host, expecting the same bits (GPU targets).
void run_encoding_sweep(const std::vector<EncodingCase>& cases, const std::string& target, bool against_host);

// The adjoint identity <R x, g> = <x, R^T g> between a spec's forward and
// backward kernels on `target`, for random x and g; relative error.
double adjoint_error(const std::string& spec, const std::string& target);

}  // namespace ropegen::test
