#include "runtime/kernel_table.h"

#include <algorithm>
#include <utility>

#include "ropegen/call.h"

namespace ropegen::runtime {
namespace {

Diagnostic no_kernel_table(const RopeSpec& spec, const char* why) { return Diagnostic{{spec.name, -1, -1}, why, {}}; }

// Where pair i of the rotary dims sits in a head: (first, second) element.
std::pair<int, int> pair_elements(const RopeSpec& spec, Pairing pairing, int i) {
  const int off = spec.rotary_offset;
  return pairing == Pairing::Half ? std::pair{off + i, off + spec.num_pairs() + i} : std::pair{off + 2 * i, off + 2 * i + 1};
}

Result<std::vector<float>> rope_kernel_table(Runtime& runtime, const RopeSpec& spec, const std::vector<int64_t>& positions,
                                             int64_t seq_len) {
  RopeSpec ks = spec;
  ks.dtype = DType::F32, ks.layout = Layout::THD, ks.positions = PositionsMode::Explicit, ks.kv_cache = {};
  const int axes = ks.axes.count();
  const int64_t rows = static_cast<int64_t>(positions.size()) / std::max(axes, 1);
  const int64_t d = ks.head_dim, half = ks.num_pairs();
  std::vector<float> q(static_cast<size_t>(rows * d), 0.0f), out(q.size());
  for (int64_t row = 0; row < rows; ++row)
    for (int i = 0; i < half; ++i) q[row * d + pair_elements(ks, ks.pairing, i).first] = 1.0f;
  std::vector<int64_t> ids = positions;
  Call call;
  call.q = Tensor::dense(q.data(), ElementType::Float32, {rows, 1, d});
  call.out_q = Tensor::dense(out.data(), ElementType::Float32, {rows, 1, d});
  call.positions = axes > 0 ? Tensor::dense(ids.data(), ElementType::Int64, {rows, int64_t{axes}})
                            : Tensor::dense(ids.data(), ElementType::Int64, {rows});
  call.seq_len = seq_len;
  if (const Status ran = runtime.run(ks, call); !ran) return ran.errors();
  std::vector<float> table(static_cast<size_t>(rows * 2 * half));
  for (int64_t row = 0; row < rows; ++row)
    for (int i = 0; i < half; ++i) {
      const auto [c, s] = pair_elements(ks, ks.output_pairing, i);
      table[row * 2 * half + i] = out[row * d + c];
      table[row * 2 * half + half + i] = out[row * d + s];
    }
  return table;
}

Result<std::vector<float>> sinusoidal_kernel_table(Runtime& runtime, const RopeSpec& spec,
                                                   const std::vector<int64_t>& positions) {
  RopeSpec ks = spec;
  ks.dtype = DType::F32, ks.layout = Layout::BSD, ks.positions = PositionsMode::Explicit;
  const int64_t rows = static_cast<int64_t>(positions.size());
  std::vector<float> x(static_cast<size_t>(rows * ks.dim), 0.0f), out(x.size());
  std::vector<int64_t> ids = positions;
  Call call;
  call.q = Tensor::dense(x.data(), ElementType::Float32, {1, rows, int64_t{ks.dim}});
  call.out_q = Tensor::dense(out.data(), ElementType::Float32, {1, rows, int64_t{ks.dim}});
  call.positions = Tensor::dense(ids.data(), ElementType::Int64, {1, rows});
  if (const Status ran = runtime.run(ks, call); !ran) return ran.errors();
  return out;
}

}  // namespace

Result<std::vector<float>> kernel_table(Runtime& runtime, const RopeSpec& spec, const std::vector<int64_t>& positions,
                                        int64_t seq_len) {
  if (spec.encoding == Encoding::Sinusoidal) return sinusoidal_kernel_table(runtime, spec, positions);
  if (spec.encoding != Encoding::Rope) return no_kernel_table(spec, "only rope and sinusoidal kernels compute a table");
  if (spec.xpos.enabled) return no_kernel_table(spec, "a spec with xpos has no cos/sin table: queries and keys are scaled differently");
  if (spec.frequency.scheme == FrequencyScheme::Runtime || spec.frequency.scheme == FrequencyScheme::Table)
    return no_kernel_table(spec, "a spec whose frequencies or table come with each call has no table of its own");
  if (positions.size() % std::max(1, spec.axes.count()) != 0)
    return no_kernel_table(spec, "multi-axis positions need one id per axis in each row");
  return rope_kernel_table(runtime, spec, positions, seq_len);
}

}  // namespace ropegen::runtime
