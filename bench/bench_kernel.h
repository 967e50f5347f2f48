// Timing a spec's kernel against a copy of the same bytes in the same run
// (RoPE is memory-bound: the copy is the yardstick). The copy is glibc's
// memcpy split into `threads` contiguous chunks, one per thread of a pool
// created before timing starts. Kernel, copy (and optionally the
// hand-written table kernel, table_kernel.h) are timed interleaved: `passes`
// passes, each a batch of runs of every side in turn; each side's time is
// the median of all its runs. ratio = kernel GB/s / copy GB/s.
//
// Threads: `threads` sets the copy's and the table kernel's threads. The
// rope-gen kernel runs on Halide's thread pool, whose size the process sets
// through HL_NUM_THREADS before its first kernel runs (process-wide state:
// the library does not touch the environment; `rope-gen bench --threads`
// and compare_bench set it). bench_rope refuses a `threads` that differs
// from HL_NUM_THREADS, so both sides always use the same number of threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::bench {

enum class BenchPositions {
  Sequential,  // 0 .. S-1 per sequence: implicit, or explicit ids that say so
  Random,      // explicit ids uniform in [0, kRandomPositions), fixed seed (decode)
};
inline constexpr int64_t kRandomPositions = 8192;

// Shapes: rope [B, S, H] of q (and k's heads); sinusoidal and learned
// [B, S] rows of dim; alibi scores [B, H = num_heads, Sq = seq, Sk = keys].
struct BenchOptions {
  int64_t batch = 1, seq = 128, heads = 32;
  int64_t k_heads = 0;          // 0: q only
  int64_t keys = 0;             // alibi: Sk
  bool backward = false;        // rope: time the backward kernel
  BenchPositions positions = BenchPositions::Sequential;  // Random needs a spec with explicit positions
  bool in_place = false;        // out = in (the copy still copies between two buffers)
  bool table_kernel = false;    // also time the hand-written table kernel (rope, host)
  int threads = 0;              // 0: all cores (and HL_NUM_THREADS unset or the same)
  std::string target = "host";
  double min_seconds = 0.5;     // per side, over all passes
  int passes = 7;
};

struct SideResult {
  double us = 0, gbps = 0, ratio = 0;  // median per run; ratio to the copy
  int runs = 0;
};

struct BenchResult {
  double gbps = 0, copy_gbps = 0, ratio = 0;
  double kernel_us = 0, copy_us = 0;
  int64_t bytes = 0;            // read + written per call
  int runs = 0, copy_runs = 0;
  int threads = 0;
  std::optional<SideResult> table;  // with table_kernel
  bool table_avx512 = false;        // its AVX-512 (BF16) path ran
};

Result<BenchResult> bench_rope(const RopeSpec& spec, const BenchOptions& options);

}  // namespace ropegen::bench
