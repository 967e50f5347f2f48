// What vLLM's and llama.cpp's CPU RoPE do, written by hand: a float32 cos
// and sin table [max_pos, rotary_dim / 2] computed once (float64 angles,
// rounded to float32; not part of a run), then per token its row gathered
// once and every head of q and k rotated with it. A yardstick for rope-gen's
// kernels in bench/, not a feature: tokens of [heads, head_dim] rows (bshd,
// thd), rotary_dim = head_dim, half or interleaved pairing, f32 or bf16,
// frequencies fixed by the spec, no xPos or multi-axis positions.
//
// On CPUs with AVX512-BF16 (checked at run time) it runs an AVX-512 loop
// with FMA and vcvtneps2bf16 (round to nearest even); elsewhere, or when the
// pairs do not fill whole vectors, portable C++ with the same rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen::bench {

// q [tokens, q_heads, head_dim] and k [tokens, k_heads, head_dim], dense, in
// the spec's dtype (bf16 as its uint16 bits); out == in rotates in place.
struct TableTokens {
  const void* q = nullptr;
  void* out_q = nullptr;
  int64_t q_heads = 0;
  const void* k = nullptr;  // k_heads 0: q only
  void* out_k = nullptr;
  int64_t k_heads = 0;
  const int32_t* positions = nullptr;  // one per token, in [0, max_pos)
  int64_t tokens = 0;
};

class TableKernel {
 public:
  // A diagnostic names what the hand-written kernel does not cover.
  // allow_avx512 false: the portable loop even where AVX512-BF16 is there.
  static Result<TableKernel> make(const RopeSpec& spec, int64_t max_pos, bool allow_avx512 = true);

  // Tokens [begin, end) of `t` (one thread's chunk).
  void run(const TableTokens& t, int64_t begin, int64_t end) const;
  bool avx512() const { return avx512_; }

  // One token's heads: x -> y (may be equal), with its cos/sin row.
  using Rotate = void (*)(const void* x, void* y, int64_t heads, int head_dim, int pairs, const float* cos,
                          const float* sin);

 private:
  Rotate rotate_ = nullptr;
  std::vector<float> cos_, sin_;  // [max_pos][pairs_]
  int head_dim_ = 0, pairs_ = 0;
  bool interleaved_ = false, bf16_ = false, avx512_ = false;
};

}  // namespace ropegen::bench
