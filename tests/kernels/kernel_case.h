// One kernel call from a sweep of the spec space, run on a target and
// checked against the independent float64 reference (tests/support). The
// CPU and GPU kernel tests share it, so every backend faces the same cases.
// A case prints its parameters, so a failure names the exact combination.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <Halide.h>

#include "ropegen/call.h"
#include "ropegen/spec.h"
#include "runtime/kernel.h"

namespace ropegen::test {

struct Case {
  std::string layout = "bshd", pairing = "half", dtype = "f32", scaling, xpos, output_pairing;
  int head_dim = 16, rotary_dim = 16, rotary_offset = 0;
  int B = 2, S = 5, H = 3, Hk = 0;  // Hk = 0: no k
  bool explicit_positions = false, shared_positions = false, int64_positions = false, in_place = false;
  bool backward = false;  // the gradient (rotation by -angle): q and k are upstream gradients
  int64_t offset = 0;
  std::vector<int64_t> cu_seqlens;  // thd
  // A qk_norm section ("qk_norm: {...}\n"); with weight per_head the case
  // passes random weights in [0.5, 1.5) (q's and k's differ), in the spec's
  // dtype or (float32_norm_weights) float32, not rounded to the dtype.
  std::string qk_norm;
  bool float32_norm_weights = false;
  // output_dtype ("fp8_e4m3", "fp8_e5m2"; empty: the spec's dtype): out_q
  // and out_k are uint8 codes of x / q_scale and x / k_scale, or of x *
  // q_scale and x * k_scale (multiply_scales: `fp8_scale: multiply`).
  std::string output_dtype;
  float q_scale = 1.0f, k_scale = 1.0f;
  bool multiply_scales = false;
  // output_quant's group (0: none): q's codes per group of dims, ue8m0 or
  // (float32_scales) float32 scales in out_scales.
  int quant_group = 0;
  bool float32_scales = false;

  std::string spec_text() const;
  std::string describe() const;
};

// What a case wrote: the outputs' storage (spec dtype or fp8 codes, the layout's order).
struct CaseOutputs {
  DType dtype = DType::F32;
  Halide::Buffer<> q, k;  // k undefined without k; uint8 fp8 codes with output_dtype
  // The backward of qk_norm weight per_head: the weights' gradients (k's with k).
  Halide::Buffer<float> d_q_norm_weight, d_k_norm_weight;
  Halide::Buffer<float> out_scales;  // output_quant: q's group scales
};

// Where a case's tensors are on a GPU target: host memory (the runtime
// stages them) or the target's device (device calls: DeviceMirror, nothing
// staged; packed layouts pass cu_seqlens [0, T] when the case has none).
enum class Memory { Host, Device };

// Runs c on target and checks it against the reference (gtest failures,
// never throws). The outputs are empty when the case could not run.
CaseOutputs run_case(const Case& c, const Halide::Target& target, Memory memory = Memory::Host);

// Runs `call` on the kernel of `spec` and `variant` for `target` (a test
// failure names what was refused). Kernels come from the process's Runtime:
// its memory level shares a kernel among the cases of a test, its disk cache
// (ROPEGEN_CACHE_DIR, which ctest sets in the build tree) shares host
// kernels among the tests of one executable (the parity tests' host side
// reuses the CPU sweeps' kernels).
void run_kernel(const RopeSpec& spec, const KernelVariant& variant, const Halide::Target& target,
                const Call& call);

// A host tensor over `data`; strides empty: dense.
ropegen::Tensor host_tensor(const void* data, ElementType type, const std::vector<int64_t>& shape,
                            const std::vector<int64_t>& strides = {});

// Units in the last place between two stored values of the same dtype (the
// distance between their positions on the dtype's number line; 0 = the same
// bits, or +0 vs -0). uint8 buffers hold fp8 codes (sign and magnitude),
// whatever dtype says.
int64_t ulp_distance(DType dtype, const Halide::Buffer<>& a, const Halide::Buffer<>& b, int64_t index);

}  // namespace ropegen::test
