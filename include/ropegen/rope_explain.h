// What a spec does, in numbers (`rope-gen explain`, ropegen.explain,
// ropegen.plot): per rotary pair its frequency before and after scaling, its
// wavelength, the regime the scaling put it in and its axis; the attention
// factor and the rule it came from; and how far the cos/sin that engines use
// lie from float64 up to a position. Frequencies, regimes and factors are
// rope_math's, the kernels' own constants, never derived a second time here.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ropegen/result.h"
#include "ropegen/rope_math.h"
#include "ropegen/spec.h"

namespace ropegen {

struct PairExplanation {
  int index = 0;
  double inv_freq = 0;            // after scaling, radians per position
  double inv_freq_unscaled = 0;   // the same spec without its scaling
  double wavelength = 0;          // 2 pi / inv_freq, in positions (infinite for a zero frequency)
  PairScaling scaling;            // rope_math's regime and its value
  std::optional<int> axis;        // multi-axis specs: the position axis the pair reads
  double turns = 0;               // full turns within Explanation::context positions: context * inv_freq / (2 pi)
  std::optional<std::pair<int, int>> columns;  // sinusoidal: the (sin, cos) columns of the PE (cos absent: -1)
};

// The largest |error| against float64 of the values that multiply q (rope:
// cos and sin times the attention factor a; sinusoidal: the PE), over the
// positions checked and every pair. With f the pair's float64 frequency and
// p the position, the float64 value is a * cos(p f) from the exact product
// p f; the others:
struct TrigErrors {
  // a * cos(t) with t = fl32(fl32(p) * fl32(f)), the float32 angle HF's
  // rotary classes compute (inv_freq and positions in float32, one float32
  // multiply), cos taken exactly: the error of the angle alone.
  double f32_angle = 0;
  // That value rounded once to bf16 / f16 (nearest even): a cos/sin cache
  // built as vLLM builds it (float32 angles) and kept in the model's dtype.
  double bf16_table = 0;
  double f16_table = 0;
  std::optional<double> rope_gen;  // the spec's own kernel (float32), when it was run
};

struct PrecisionBin {
  int64_t first = 0, last = 0;  // positions first..last: 0..1, 2..3, 4..7, ..., ..max_pos
  TrigErrors max_error;
};

struct Precision {
  int64_t max_pos = 0;
  int64_t positions_checked = 0;  // max_pos + 1 unless sampled
  bool sampled = false;           // past kExhaustivePositions: a fixed sample per bin (explain.cpp says which)
  TrigErrors max_error;
  std::vector<PrecisionBin> by_position;
  std::string rope_gen_note;      // why there is no rope_gen value, when there is none
};

struct Explanation {
  std::string name;
  Encoding encoding = Encoding::Rope;
  int rotary_dim = 0;             // rope: rotary_dim; sinusoidal, learned: dim; alibi: 0
  ScalingType scaling = ScalingType::None;
  double factor = 1.0;
  std::optional<int64_t> seq_len; // the run-time length the frequencies are for, where they depend on it
  double attention_factor = 1.0;
  std::string attention_factor_source;
  std::optional<int64_t> original_max_position;
  int64_t max_pos = 0;            // the positions explained: 0..max_pos
  // What PairExplanation::turns counts against: the original context, else max_pos.
  int64_t context = 0;
  const char* context_source = "original_max_position";  // or "max_pos"
  std::optional<int64_t> extended_context;  // original_max_position * factor, for scalings that extend it
  std::vector<PairExplanation> pairs;       // rope: the rotary pairs; sinusoidal: its frequencies
  std::vector<double> alibi_slopes;         // alibi: per head
  std::optional<Precision> precision;
  std::vector<std::string> notes;           // what the numbers leave out, in words
};

// Positions up to this are all checked; past it, a sample.
constexpr int64_t kExhaustivePositions = int64_t{1} << 17;

// The spec's own kernel's table at these positions (runtime::kernel_table:
// [rows, columns] as rope_table lays them out; multi-axis: n_axes ids per
// row), for its frequencies at seq_len.
using KernelTable = std::function<Result<std::vector<float>>(const std::vector<int64_t>& positions, int64_t seq_len)>;

struct ExplainOptions {
  std::optional<int64_t> seq_len;  // run-time length for dynamic / longrope (absent: HF's init-time frequencies)
  std::optional<int64_t> max_pos;  // absent: default_max_pos(spec)
  KernelTable kernel_table;        // empty: no rope_gen column
  bool precision = true;           // false: frequencies only (no Explanation::precision)
};

// The context the scaling extends to (original_max_position * factor), or
// 131072 if that is more.
int64_t default_max_pos(const RopeSpec& spec);

// Errors: max_pos or seq_len out of range, or the kernel failing.
Result<Explanation> explain(const RopeSpec& spec, const ExplainOptions& options = {});

// `rope-gen explain --json`: keys name, encoding, rotary_dim,
// attention_factor, attention_factor_source, original_max_position, pairs
// [{index, inv_freq, inv_freq_unscaled, wavelength, regime, axis, ...}],
// precision {max_pos, f32_angle, bf16_table, f16_table, rope_gen, ...}
// (docs/explain.md lists every key).
std::string explanation_json(const Explanation& e);

}  // namespace ropegen
