// Timing a spec's kernel against a copy of the same bytes in the same run
// (RoPE is memory-bound: the copy is the yardstick). Medians of repeated
// runs after warm-up; ratio = kernel GB/s / copy GB/s.
#pragma once

#include <cstdint>
#include <string>

#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::bench {

// Shapes: rope [B, S, H] of q (and k's heads); sinusoidal and learned
// [B, S] rows of dim; alibi scores [B, H = num_heads, Sq = seq, Sk = keys].
struct BenchOptions {
  int64_t batch = 1, seq = 128, heads = 32;
  int64_t k_heads = 0;          // 0: q only
  int64_t keys = 0;             // alibi: Sk
  bool backward = false;        // rope: time the backward kernel
  int threads = 0;              // 0: Halide's default (all cores)
  std::string target = "host";
  double min_seconds = 0.5;     // per measured side
};

struct BenchResult {
  double gbps = 0, copy_gbps = 0, ratio = 0;
  double kernel_us = 0, copy_us = 0;
  int64_t bytes = 0;            // read + written per call
  int runs = 0;
};

Result<BenchResult> bench_rope(const RopeSpec& spec, const BenchOptions& options);

}  // namespace ropegen::bench
