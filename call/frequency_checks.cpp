// What a call gives instead of computed frequencies or positions' rows: a
// learned table, run-time frequencies, an engine's cos/sin cache.
#include <fmt/format.h>

#include <cmath>

#include "call/checks.h"
#include "ropegen/position_limits.h"

namespace ropegen::call {

void check_table(CheckContext& x) {
  const int64_t dim = x.c.row_dim;
  if (encoding(x.c) != Encoding::Learned) {
    if (x.call.table)
      x.fail("table", fmt::format("table is for `encoding: learned`; this spec is {}", encoding_name(x.c)));
    return;
  }
  if (!x.call.table) {
    x.fail("table", fmt::format("`encoding: learned` adds rows of a table: pass it shaped (max_len, {})", dim));
    return;
  }
  const Tensor& t = *x.call.table;
  int64_t elements = 0;
  if (t.rank != 2 || t.shape[1] != dim || t.shape[0] < 1 || __builtin_mul_overflow(t.shape[0], dim, &elements) ||
      elements > INT32_MAX) {
    x.fail("table", fmt::format("table has shape {} but must be (max_len, {}) (dim = {}) with at most 2^31-1 elements",
                                shape_str(t), dim, dim));
    return;
  }
  if ((dim > 1 && t.strides[1] != 1) || (t.shape[0] > 1 && t.strides[0] != dim)) {
    x.fail("table", fmt::format("table must be a dense (max_len, {}) tensor (its strides are ({}, {}))", dim,
                                t.strides[0], t.strides[1]));
    return;
  }
  if (x.range_known && x.range.last >= t.shape[0])
    x.fail("table", fmt::format("position {} is outside the table: it has {} rows (positions 0..{}); pass a longer "
                                "table or smaller positions",
                                x.range.last, t.shape[0], t.shape[0] - 1));
}

// Frequency scheme table: cos and sin of every position a call reads, as
// engines keep them ([max_pos, rotary_dim], row p = [cos | sin]).
void check_cos_sin_cache(CheckContext& x) {
  const int64_t dim = x.c.rotary_dim;
  if (!x.c.table_frequencies) {
    if (x.call.cos_sin_cache)
      x.fail("cos_sin_cache",
             "cos_sin_cache is for specs with `frequency: {scheme: table}`; this spec computes its "
             "cos and sin");
    return;
  }
  if (!x.call.cos_sin_cache) {
    x.fail("cos_sin_cache", fmt::format("the spec has `frequency: {{scheme: table}}`: pass cos_sin_cache, float32 "
                                        "shaped (max_pos, {}) (row p: cos of the {} pairs at position p, then their "
                                        "sin)",
                                        dim, dim / 2));
    return;
  }
  const Tensor& t = *x.call.cos_sin_cache;
  int64_t span = 0;
  const int64_t row_stride = t.rank == 2 && t.strides[0] != INT64_MIN ? std::abs(t.strides[0]) : INT64_MAX;
  const bool fits = t.rank == 2 && t.shape[1] == dim && t.shape[0] >= 1 && t.shape[0] <= INT32_MAX &&
                    !__builtin_mul_overflow(t.shape[0] - 1, row_stride, &span) && span <= INT32_MAX - dim;
  if (!fits) {
    x.fail("cos_sin_cache", fmt::format("cos_sin_cache has shape {} but must be (max_pos, {}) (rotary_dim = {}), "
                                        "spanning at most 2^31-1 elements",
                                        shape_str(t), dim, dim));
    return;
  }
  if (t.strides[1] != 1) {
    x.fail("cos_sin_cache",
           fmt::format("cos_sin_cache's last dim must be contiguous (stride 1, not {}); its rows may be "
                       "any distance apart",
                       t.strides[1]));
    return;
  }
  if (x.range_known && x.range.last >= t.shape[0]) {
    const bool ids = x.call.positions.has_value();
    x.fail("cos_sin_cache",
           fmt::format("{} {} is outside cos_sin_cache: it has {} rows (positions 0..{}){}; pass a longer cache or "
                       "smaller positions",
                       ids ? "position id" : "position (offset + index)", x.range.last, t.shape[0], t.shape[0] - 1,
                       ids ? "" : fmt::format(", the offset is {}", x.call.offset)));
  }
}

// A run-time frequency vector: [rotary_dim / 2], contiguous (freqs, and
// d_freqs in gradient_checks).
bool check_frequency_vector(CheckContext& x, const Tensor& t, const char* name) {
  const Shape want = {x.c.rotary_dim / 2};
  if (shape_of(t) != want) {
    x.fail(name,
           fmt::format("{} has shape {} but the spec needs {} (rotary_dim / 2)", name, shape_str(t), shape_str(want)));
    return false;
  }
  if (t.shape[0] > 1 && t.strides[0] != 1) {
    x.fail(name, fmt::format("{} must be contiguous (stride 1, not {})", name, t.strides[0]));
    return false;
  }
  return true;
}

void check_freqs(CheckContext& x) {
  if (!x.c.runtime_frequencies) {
    if (x.call.freqs) x.fail("freqs", "freqs are for specs with `frequency: {scheme: runtime}`");
    return;
  }
  if (!x.call.freqs) {
    x.fail("freqs", fmt::format("the spec has `frequency: {{scheme: runtime}}`: pass inv_freq shaped ({},)",
                                x.c.rotary_dim / 2));
    return;
  }
  if (!check_frequency_vector(x, *x.call.freqs, "freqs") || x.on_device) return;  // device: the caller's
  // The bound every spec's frequencies obey (kMaxInvFreq: the kernels count
  // quarter turns of position * inv_freq in an int64); NaN or inf would
  // turn every output into NaN without a word.
  const auto* f = static_cast<const float*>(x.call.freqs->data);
  for (int64_t i = 0; i < x.call.freqs->shape[0]; ++i)
    if (!(std::fabs(f[i]) <= kMaxInvFreq)) {
      x.fail("freqs", fmt::format("freqs[{}] is {}: run-time frequencies must be finite and at most {} in magnitude "
                                  "(radians per position)",
                                  i, f[i], kMaxInvFreq));
      return;
    }
}

}  // namespace ropegen::call
