#include "lowering/rope_precision.h"

#include <algorithm>
#include <cmath>

namespace ropegen::lowering {
namespace {

constexpr int64_t kSamplesPerBin = 4096;
constexpr int64_t kKernelRows = 16384;  // rows per kernel call: bounds its buffers

// Bin 0 holds positions 0 and 1, bin k >= 1 positions 2^k .. 2^(k+1) - 1.
int bin_of(int64_t p) {
  int k = 0;
  while (p >> (k + 1)) ++k;
  return k;
}

std::vector<PrecisionBin> empty_bins(int64_t max_pos) {
  std::vector<PrecisionBin> bins(bin_of(max_pos) + 1);
  for (size_t k = 0; k < bins.size(); ++k) {
    bins[k].first = k == 0 ? 0 : int64_t{1} << k;
    bins[k].last = std::min(max_pos, k == 0 ? 1 : (int64_t{1} << (k + 1)) - 1);
  }
  return bins;
}

// A NaN error is the worst there is, and stays.
void raise(double& worst, double error) {
  if (!std::isnan(worst) && !(error <= worst)) worst = error;
}

void raise(TrigErrors& worst, const TrigErrors& e) {
  raise(worst.f32_angle, e.f32_angle);
  raise(worst.bf16_table, e.bf16_table);
  raise(worst.f16_table, e.f16_table);
  if (e.rope_gen) {
    if (!worst.rope_gen) worst.rope_gen = 0.0;
    raise(*worst.rope_gen, *e.rope_gen);
  }
}

// The columns of a table row: (pair, cos?) as rope_table lays them out.
std::vector<std::pair<int, bool>> table_columns(const RopeSpec& spec, size_t pairs) {
  std::vector<std::pair<int, bool>> columns;
  if (spec.encoding == Encoding::Sinusoidal) {
    for (int c = 0; c < spec.dim; ++c) {
      const auto [pair, is_cos] = sinusoidal_column(spec, c);
      columns.push_back({pair, is_cos == 1});
    }
    return columns;
  }
  for (bool is_cos : {true, false})
    for (size_t i = 0; i < pairs; ++i) columns.push_back({static_cast<int>(i), is_cos});
  return columns;
}

struct Values {
  std::vector<double> cos, sin;  // per pair, times the attention factor
};

// cos and sin of the exact product p * f (p * f = hi + lo exactly; the C
// library reduces hi exactly; lo is below half an ulp of hi).
void exact_values(int64_t p, const PrecisionInputs& in, Values& v) {
  const double dp = static_cast<double>(p);
  for (size_t i = 0; i < in.inv_freq.size(); ++i) {
    const double hi = dp * in.inv_freq[i], lo = std::fma(dp, in.inv_freq[i], -hi);
    const double c = std::cos(hi), s = std::sin(hi);
    v.cos[i] = in.attention_factor * (c - s * lo);
    v.sin[i] = in.attention_factor * (s + c * lo);
  }
}

// The float32-angle, bf16 and f16 errors at one position.
TrigErrors engine_errors(int64_t p, const PrecisionInputs& in, const Values& exact) {
  TrigErrors e;
  const float p32 = static_cast<float>(p);
  for (size_t i = 0; i < in.inv_freq.size(); ++i) {
    const float angle = p32 * static_cast<float>(in.inv_freq[i]);
    const double t = angle;
    for (const auto& [value, reference] : {std::pair{in.attention_factor * std::cos(t), exact.cos[i]},
                                           std::pair{in.attention_factor * std::sin(t), exact.sin[i]}}) {
      raise(e.f32_angle, std::fabs(value - reference));
      raise(e.bf16_table, std::fabs(round_to_format(value, 8, -126) - reference));
      raise(e.f16_table, std::fabs(round_to_format(value, 11, -14) - reference));
    }
  }
  return e;
}

}  // namespace

double round_to_format(double x, int bits, int min_exponent) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int exponent = std::max(std::ilogb(x), min_exponent);
  const double ulp = std::ldexp(1.0, exponent - (bits - 1));
  return std::nearbyint(x / ulp) * ulp;  // the default rounding mode: nearest even
}

std::vector<int64_t> precision_positions(int64_t max_pos) {
  std::vector<int64_t> out;
  if (max_pos <= kExhaustivePositions) {
    for (int64_t p = 0; p <= max_pos; ++p) out.push_back(p);
    return out;
  }
  for (const PrecisionBin& b : empty_bins(max_pos)) {
    const int64_t size = b.last - b.first + 1;
    if (size <= kSamplesPerBin) {
      for (int64_t p = b.first; p <= b.last; ++p) out.push_back(p);
      continue;
    }
    // floor(j (size - 1) / (n - 1)) without overflowing int64 (size < 2^53, j < 2^12).
    const int64_t step = (size - 1) / (kSamplesPerBin - 1), rest = (size - 1) % (kSamplesPerBin - 1);
    for (int64_t j = 0; j < kSamplesPerBin; ++j) out.push_back(b.first + j * step + j * rest / (kSamplesPerBin - 1));
  }
  for (int64_t p = max_pos - kSamplesPerBin + 1; p <= max_pos; ++p) out.push_back(p);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<Precision> measure_precision(const PrecisionInputs& in) {
  Precision out;
  out.max_pos = in.max_pos;
  out.by_position = empty_bins(in.max_pos);
  const std::vector<int64_t> positions = precision_positions(in.max_pos);
  out.positions_checked = static_cast<int64_t>(positions.size());
  out.sampled = out.positions_checked < in.max_pos + 1;
  if (!in.kernel_table) out.rope_gen_note = in.no_kernel_note.empty() ? "the kernel was not run" : in.no_kernel_note;

  const size_t pairs = in.inv_freq.size();
  const std::vector<std::pair<int, bool>> columns = table_columns(in.spec, pairs);
  const int per_row = std::max(1, in.spec.axes.count());
  Values exact{std::vector<double>(pairs), std::vector<double>(pairs)};
  for (size_t start = 0; start < positions.size(); start += kKernelRows) {
    const size_t end = std::min(positions.size(), start + kKernelRows);
    std::vector<float> kernel;
    if (in.kernel_table) {
      std::vector<int64_t> ids;  // multi-axis: every axis at the position
      for (size_t r = start; r < end; ++r) ids.insert(ids.end(), per_row, positions[r]);
      Result<std::vector<float>> got = in.kernel_table(ids, in.kernel_seq_len);
      if (!got) return got.errors();
      kernel = std::move(got).value();
      if (kernel.size() != (end - start) * columns.size())
        return Diagnostic{{in.spec.name, -1, -1}, "internal error: the kernel's table has the wrong size", {}};
    }
    for (size_t r = start; r < end; ++r) {
      const int64_t p = positions[r];
      exact_values(p, in, exact);
      TrigErrors e = engine_errors(p, in, exact);
      if (in.kernel_table) {
        double worst = 0;
        const float* row = &kernel[(r - start) * columns.size()];
        for (size_t c = 0; c < columns.size(); ++c) {
          const auto [pair, is_cos] = columns[c];
          raise(worst, std::fabs(row[c] - (is_cos ? exact.cos[pair] : exact.sin[pair])));
        }
        e.rope_gen = worst;
      }
      raise(out.by_position[bin_of(p)].max_error, e);
      raise(out.max_error, e);
    }
  }
  return out;
}

}  // namespace ropegen::lowering
