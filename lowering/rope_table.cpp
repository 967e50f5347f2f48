#include "ropegen/rope_table.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ropegen/position_limits.h"
#include "ropegen/rope_math.h"

namespace ropegen {

namespace {

Diagnostic no_table(const RopeSpec& spec, const char* why) { return named_error(spec.name, why); }

// Angles in double: exact to ~1e-9 rad at the positions engines use.
RopeTable cos_sin_table(const RopeSpec& spec, const std::vector<int64_t>& positions, int64_t seq_len) {
  RopeTable t;
  const int per_row = std::max(1, spec.axes.count());
  const std::vector<int> axis = pair_axes(spec);
  t.rows = static_cast<int64_t>(positions.size()) / per_row;
  t.columns = spec.rotary_dim;
  t.layout = "[cos of the pairs | sin of the pairs] x attention_factor";
  t.seq_len = seq_len;
  const RopeFrequencies f = compute_frequencies(spec, seq_len);
  t.attention_factor = f.attention_factor;
  const int half = spec.num_pairs();
  t.values.resize(static_cast<size_t>(t.rows) * t.columns);
  for (int64_t row = 0; row < t.rows; ++row) {
    float* out = &t.values[static_cast<size_t>(row) * t.columns];
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[row * per_row + axis[i]]) * f.inv_freq[i];
      out[i] = static_cast<float>(std::cos(angle) * f.attention_factor);
      out[half + i] = static_cast<float>(std::sin(angle) * f.attention_factor);
    }
  }
  return t;
}

RopeTable sinusoidal_table(const RopeSpec& spec, const std::vector<int64_t>& positions) {
  RopeTable t;
  t.rows = static_cast<int64_t>(positions.size());
  t.columns = spec.dim;
  t.layout = spec.table_form == TableForm::Interleaved ? "PE[pos, 2i] = sin, PE[pos, 2i+1] = cos"
                                                       : "[sin of the pairs | cos of the pairs] (RoFormer)";
  const std::vector<double> f = sinusoidal_frequencies(spec);
  t.values.resize(static_cast<size_t>(t.rows) * t.columns);
  for (int64_t row = 0; row < t.rows; ++row)
    for (int c = 0; c < spec.dim; ++c) {
      const auto [pair, is_cos] = sinusoidal_column(spec, c);
      const double angle = static_cast<double>(positions[row]) * f[pair];
      t.values[static_cast<size_t>(row) * t.columns + c] = static_cast<float>(is_cos ? std::cos(angle) : std::sin(angle));
    }
  return t;
}

RopeTable slope_table(const RopeSpec& spec) {
  RopeTable t;
  t.rows = 1;
  t.columns = spec.num_heads;
  t.layout = "ALiBi slope of each head";
  for (double m : alibi_slopes(spec.num_heads)) t.values.push_back(static_cast<float>(m));
  return t;
}

}  // namespace

Result<RopeTable> rope_table(const RopeSpec& spec, const std::vector<int64_t>& positions,
                             std::optional<int64_t> seq_len) {
  if (spec.encoding == Encoding::Alibi) return slope_table(spec);
  if (spec.encoding == Encoding::Learned) return no_table(spec, "a learned encoding's table is its own (passed as the call's table)");
  if (spec.xpos.enabled) return no_table(spec, "a spec with xpos has no cos/sin table: queries and keys are scaled differently");
  if (spec.frequency.scheme == FrequencyScheme::Runtime)
    return no_table(spec, "a spec with `frequency: {scheme: runtime}` has no table: its frequencies are given per call");
  if (spec.frequency.scheme == FrequencyScheme::Table)
    return no_table(spec, "a spec with `frequency: {scheme: table}` has no table of its own: it reads the call's cos_sin_cache");
  const size_t per_row = std::max(1, spec.axes.count());
  if (positions.size() % per_row != 0)
    return named_error("positions", fmt::format("multi-axis positions need {} ids per row", per_row));
  int64_t max_position = 0;
  for (int64_t p : positions) {
    if (!is_valid_position(p))
      return named_error("positions",
                         fmt::format("position {} is out of range: positions must be in 0..{}", p, kMaxPositionText));
    max_position = std::max(max_position, p);
  }
  if (spec.encoding == Encoding::Sinusoidal) return sinusoidal_table(spec, positions);
  return cos_sin_table(spec, positions, seq_len.value_or(max_position + 1));
}

}  // namespace ropegen
