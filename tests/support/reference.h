// Independent float64 reference implementation of rotary position embedding,
// used by the test suite as ground truth. It shares NO code with lowering/:
// it depends only on the public spec header and the C++ standard library.
// It transcribes the formulas of Hugging Face transformers
// (modeling_rope_utils.py + LlamaRotaryEmbedding) and lucidrains
// rotary-embedding-torch (pixel / constant / custom freqs, xPos) directly.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ropegen/spec.h"

namespace ropegen::ref {

struct Freqs {
  std::vector<double> inv_freq;      // rotary_dim/2, after scaling
  double attention_factor = 1.0;     // multiplies cos and sin (HF attention_scaling)
  std::vector<double> xpos_scale;    // rotary_dim/2 per-pair xPos bases s_i (empty if xpos disabled)
};

// seq_len: the run-time sequence length (dynamic NTK, longrope per_call, xPos);
// nullopt means "not given".
Freqs reference_freqs(const RopeSpec& spec, std::optional<int64_t> seq_len);

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major
};

struct Call {
  // Explicit ids: shape = the layout's token dims ([B,S] for bshd/bhsd,
  // [S,B] for sbhd, [T] for thd) or [S] (shared across the batch).
  std::optional<Tensor> positions;
  int64_t offset = 0;                // implicit positions: offset + index along S
  std::vector<int64_t> cu_seqlens;   // thd: B+1 cumulative token starts (empty = one sequence)
  std::optional<int64_t> seq_len;    // default: max position in the call + 1 (HF: max(position_ids)+1)
};

// Rotates x (q if !is_key, k if is_key) laid out per spec.layout:
// bshd [B,S,H,D], bhsd [B,H,S,D], sbhd [S,B,H,D], thd [T,H,D]; D = head_dim.
// Throws std::invalid_argument on inconsistent shapes.
Tensor reference_apply(const RopeSpec& spec, const Tensor& x, bool is_key, const Call& call);

}  // namespace ropegen::ref
