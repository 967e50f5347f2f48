// The cos/sin cache engines take (vLLM's and FlashInfer's cos_sin_cache):
// one row per position, [cos of the rotary_dim/2 pairs | sin of them], both
// times the attention factor — rope-gen's exact scaling math for kernels that
// are not rope-gen's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ropegen/result.h"
#include "ropegen/spec.h"

namespace ropegen {

// Other encodings have tables too: sinusoidal [N, dim] in its table_form,
// ALiBi the slopes [num_heads] (one row, no positions).
struct RopeTable {
  int64_t rows = 0;
  int columns = 0;            // rotary_dim (sinusoidal: dim, alibi: num_heads)
  std::vector<float> values;  // row-major [rows, columns]
  std::string layout;         // what the columns are, in words
  double attention_factor = 1.0;
  int64_t seq_len = 0;        // what dynamic / longrope scaling was evaluated at
};

// Rows for `positions` (multi-axis specs: n_axes ids per row, row-major);
// seq_len defaults to max position + 1 (HF). Specs with xPos have no such
// table (q and k scale differently), nor do run-time frequencies or
// `scheme: table` (which reads such a table): errors.
Result<RopeTable> rope_table(const RopeSpec& spec, const std::vector<int64_t>& positions,
                             std::optional<int64_t> seq_len = std::nullopt);

}  // namespace ropegen
