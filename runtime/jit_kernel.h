// A spec compiled for one target in this process (Halide JIT), callable on
// tensors in the spec's layout. Compilation happens once per kernel object.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <Halide.h>

#include "lowering/rope_algorithm.h"
#include "ropegen/spec.h"

namespace ropegen::runtime {

struct RopeCall {
  Halide::Buffer<> q, out_q;            // logical (d, h, s, b) views; out may alias in
  Halide::Buffer<> k, out_k;            // only with a k variant
  Halide::Buffer<> positions;           // (s, b), explicit specs
  Halide::Buffer<int32_t> cu_seqlens;   // thd with implicit positions
  int64_t offset = 0;
  int64_t seq_len = 1;                  // HF: max position id + 1
};

class JitKernel {
 public:
  JitKernel(const RopeSpec& spec, const lowering::KernelVariant& variant, const Halide::Target& target);
  void run(const RopeCall& call);
  const RopeSpec& spec() const { return spec_; }

 private:
  RopeSpec spec_;
  void copy_pass_through(const Halide::Buffer<>& in, const Halide::Buffer<>& out);

  std::unique_ptr<lowering::RopeAlgorithm> algorithm_;
  Halide::Pipeline pipeline_;
  // Partial-rotary specs only: copies the other dims on out-of-place calls.
  std::unique_ptr<lowering::PassThroughCopy> pass_through_;
  Halide::Pipeline pass_through_pipeline_;
  Halide::Target target_;
};

}  // namespace ropegen::runtime
