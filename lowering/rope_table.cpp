#include "ropegen/rope_table.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ropegen/rope_math.h"

namespace ropegen {

Result<RopeTable> rope_table(const RopeSpec& spec, const std::vector<int64_t>& positions,
                             std::optional<int64_t> seq_len) {
  if (spec.xpos.enabled)
    return Diagnostic{{spec.name, -1, -1},
                      "a spec with xpos has no cos/sin table: queries and keys are scaled differently", {}};
  RopeTable t;
  t.rows = static_cast<int64_t>(positions.size());
  t.columns = spec.rotary_dim;
  int64_t max_position = 0;
  for (int64_t p : positions) {
    if (p < 0) return Diagnostic{{"positions", -1, -1}, fmt::format("position {} is negative", p), {}};
    max_position = std::max(max_position, p);
  }
  t.seq_len = seq_len.value_or(max_position + 1);
  const RopeFrequencies f = compute_frequencies(spec, t.seq_len);
  t.attention_factor = f.attention_factor;
  const int half = spec.num_pairs();
  t.values.resize(static_cast<size_t>(t.rows) * t.columns);
  for (int64_t row = 0; row < t.rows; ++row) {
    float* out = &t.values[static_cast<size_t>(row) * t.columns];
    for (int i = 0; i < half; ++i) {
      // Angles in double: exact to ~1e-9 rad at the positions engines use.
      const double angle = static_cast<double>(positions[row]) * f.inv_freq[i];
      out[i] = static_cast<float>(std::cos(angle) * f.attention_factor);
      out[half + i] = static_cast<float>(std::sin(angle) * f.attention_factor);
    }
  }
  return t;
}

}  // namespace ropegen
