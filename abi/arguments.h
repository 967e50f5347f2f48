// The call arguments, one row each: the one table every layer reads. A
// call's tensors and scalars are named, checked, viewed, cut into parts,
// bound to compiled pipelines, listed in manifests and headers, given CLI
// flags and Python keywords by loops over kArguments; adding an argument is
// a row here, a field in Call and ropegen_call, and the code that uses it.
//
// The enum's order is the order compiled pipelines take their arguments:
// tensor inputs, then scalars, then outputs (Halide puts outputs last);
// only those a kernel reads appear in its signature.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ropegen/call.h"
#include "ropegen/ropegen_c.h"

namespace ropegen::abi {

// clang-format off
enum class Arg : uint8_t {
  // Tensor inputs.
  Q, K, V, Positions, CuSeqlens, Table, Freqs, CosSinCache, KvIndices, KvIndptr, BatchIndices, CachePositions,
  SlotMapping, SavedQ, SavedK, QNormWeight, KNormWeight,
  // Tensor outputs (the caches are updated in place).
  OutQ, OutK, KCache, VCache, DFreqs, DQNormWeight, DKNormWeight, OutScales,
  // Scalars.
  Offset, SeqLen, QScale, KScale, VScale, PoolThreads,
};
// clang-format on
inline constexpr int kArgCount = 31;
inline constexpr int kTensorArgCount = 25;  // Q .. OutScales
inline constexpr int kFirstOutput = 17;     // OutQ

constexpr int index(Arg a) { return static_cast<int>(a); }
constexpr bool is_tensor(Arg a) { return index(a) < kTensorArgCount; }

// How a kernel sees an argument, and so how a call is cut into parts.
enum class ArgKind : uint8_t {
  Rows,   // (d, h, s, b) tensors (q, k, v, outputs, saved inputs): cut by token and batch
  Ids,    // position ids, (s, b) or multi-axis (axis, s, b): cut with the rows
  Whole,  // every part sees all of it: vectors, tables, caches, index tensors
  Int64,  // scalars
  Float32,
};

enum class Direction : uint8_t { In, Out, InOut };

// What dtype a tensor must have.
enum class DtypeRule : uint8_t {
  Spec,           // the spec's dtype
  Output,         // out_q, out_k: the spec's dtype, or uint8 codes with output_dtype fp8
  SpecOrFloat32,  // the spec's dtype or float32 (qk_norm weights: mixed precision keeps them float32)
  Float32,        // float32 whatever the spec's dtype
  Ids,            // int32 or int64
  Int32,          // cache indices
  KvCache,        // the kv_cache section's dtype (fp8: uint8 codes)
  Scalar,
};

// Their spellings (ropegen.call_arguments() in Python).
constexpr const char* to_string(DtypeRule r) {
  switch (r) {
    case DtypeRule::Spec: return "spec";
    case DtypeRule::Output: return "output";
    case DtypeRule::SpecOrFloat32: return "spec_or_float32";
    case DtypeRule::Float32: return "float32";
    case DtypeRule::Ids: return "ids";
    case DtypeRule::Int32: return "int32";
    case DtypeRule::KvCache: return "kv_cache";
    case DtypeRule::Scalar: return "scalar";
  }
  return "?";
}
constexpr const char* to_string(ArgKind k) {
  switch (k) {
    case ArgKind::Rows: return "rows";
    case ArgKind::Ids: return "ids";
    case ArgKind::Whole: return "whole";
    case ArgKind::Int64: return "int64";
    case ArgKind::Float32: return "float32";
  }
  return "?";
}

// The shape a tensor has in a call, and the view the kernels take of it.
enum class ShapeRule : uint8_t {
  Layout,    // the spec's layout ([B, S, H, D], ...) -> (d, h, s, b)
  TokenIds,  // the layout's token dims ([B, S], [S, B], [T]) or [S] (+ [n_axes]) -> (s, b) / (axis, s, b)
  Vector,    // [n] -> (i)
  RowTable,  // [rows, row] -> (column, row)
  KvCache,   // the kv_cache layout -> (d, h, entry, page)
  Scalar,
};

// Which spec feature reads the argument.
enum class Feature : uint8_t {
  Always,              // q, its output, offset
  Rope,                // k, out_k
  ExplicitPositions,   // positions
  PackedLayout,        // cu_seqlens (thd, td)
  LearnedTable,        // table
  RuntimeFrequencies,  // freqs
  TableFrequencies,    // cos_sin_cache
  FrequencyGradient,   // d_freqs (backward of runtime frequencies)
  SavedInputs,         // saved_q, saved_k (backward of runtime frequencies or qk_norm)
  KvCache,             // v, k_cache, v_cache
  PagedKvCache,        // kv_indices, kv_indptr, batch_indices, cache_positions
  ContiguousKvCache,   // slot_mapping
  Fp8KvCache,          // v_scale
  Fp8Output,           // q_scale (output_dtype fp8)
  Fp8KCodes,           // k_scale: fp8 kv_cache or output_dtype fp8
  OutputQuant,         // out_scales: output_quant (per-group scales of q's fp8 codes)
  SequenceLength,      // seq_len (dynamic NTK, LongRoPE per call, xPos)
  QkNormWeight,        // q_norm_weight (k_norm_weight with k): qk_norm weight per_head
  QkNormGradient,      // d_q_norm_weight (d_k_norm_weight with k): backward of qk_norm weight per_head
  CpuSchedule,         // pool_threads (from the runtime, never the call)
};

struct ArgumentInfo {
  Arg arg;
  const char* name;                // the argument's name everywhere: C, C++, Python, diagnostics, pipelines
  const char* single_name;         // sinusoidal, learned, alibi: its name there ("x", "out"); nullptr: the same
  const char* kernel_single_name;  // and the pipeline's ("x", "out_x")
  ArgKind kind;
  Direction direction;
  DtypeRule dtype;
  ShapeRule shape;
  Feature feature;
  Arg like;  // outputs: the input whose shape they have (d_freqs: freqs'); others: themselves
  // Vectors: their length; row tables: their number of rows ("max_pos"),
  // as manifests and headers name them ("pairs": rotary_dim / 2).
  const char* extent;
  const char* cli_flag;                           // rope-gen apply's flag; nullptr: none
  std::optional<Tensor> Call::*call_tensor;       // tensors: the C++ call's field
  const ropegen_tensor* ropegen_call::*c_tensor;  // and the C call's
  const char* doc;                                // what it is, one line (CLI help, headers, docs)
};

// clang-format off
inline constexpr std::array<ArgumentInfo, kArgCount> kArguments = {{
  {Arg::Q, "q", "x", "x", ArgKind::Rows, Direction::In, DtypeRule::Spec, ShapeRule::Layout, Feature::Always, Arg::Q, nullptr,
   "--q", &Call::q, &ropegen_call::q,
   "rope: queries (backward: dL/d(out_q)); sinusoidal, learned: x; alibi: the attention scores [B, H, Sq, Sk]"},
  {Arg::K, "k", nullptr, nullptr, ArgKind::Rows, Direction::In, DtypeRule::Spec, ShapeRule::Layout, Feature::Rope, Arg::K, nullptr,
   "--k", &Call::k, &ropegen_call::k,
   "keys, like q but for their number of heads (backward: dL/d(out_k)); kv_cache specs rotate them into k_cache"},
  {Arg::V, "v", nullptr, nullptr, ArgKind::Rows, Direction::In, DtypeRule::Spec, ShapeRule::Layout, Feature::KvCache, Arg::V, nullptr,
   "--v", &Call::v, &ropegen_call::v, "values [T, Hk, Dv], copied into v_cache"},
  {Arg::Positions, "positions", nullptr, nullptr, ArgKind::Ids, Direction::In, DtypeRule::Ids, ShapeRule::TokenIds,
   Feature::ExplicitPositions, Arg::Positions, nullptr, "--positions", &Call::positions, &ropegen_call::positions,
   "position ids, int32 or int64: the layout's token dims or [S] shared by the batch (multi-axis: plus [n_axes])"},
  {Arg::CuSeqlens, "cu_seqlens", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Ids, ShapeRule::Vector,
   Feature::PackedLayout, Arg::CuSeqlens, "N+1", "--cu-seqlens", &Call::cu_seqlens, &ropegen_call::cu_seqlens,
   "packed layouts (thd, td): sequence starts [n + 1], 0 .. T"},
  {Arg::Table, "table", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Spec, ShapeRule::RowTable,
   Feature::LearnedTable, Arg::Table, "max_len", "--table", &Call::table, &ropegen_call::table,
   "learned: the position table [max_len, dim]"},
  {Arg::Freqs, "freqs", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Float32, ShapeRule::Vector,
   Feature::RuntimeFrequencies, Arg::Freqs, "pairs", "--freqs", &Call::freqs, &ropegen_call::freqs,
   "frequency scheme runtime: inv_freq, float32 [rotary_dim / 2]"},
  {Arg::CosSinCache, "cos_sin_cache", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Float32,
   ShapeRule::RowTable, Feature::TableFrequencies, Arg::CosSinCache, "max_pos", "--cos-sin-cache", &Call::cos_sin_cache, &ropegen_call::cos_sin_cache,
   "frequency scheme table: float32 [max_pos, rotary_dim], row p = [cos of the pairs | their sin] at position p"},
  {Arg::KvIndices, "kv_indices", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Int32, ShapeRule::Vector,
   Feature::PagedKvCache, Arg::KvIndices, "num_page_refs", "--kv-indices", &Call::kv_indices, &ropegen_call::kv_indices,
   "paged kv_cache: the pages of every request, int32"},
  {Arg::KvIndptr, "kv_indptr", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Int32, ShapeRule::Vector,
   Feature::PagedKvCache, Arg::KvIndptr, "B+1", "--kv-indptr", &Call::kv_indptr, &ropegen_call::kv_indptr,
   "paged kv_cache: int32 [B + 1], request b's pages start at kv_indptr[b]"},
  {Arg::BatchIndices, "batch_indices", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Int32,
   ShapeRule::Vector, Feature::PagedKvCache, Arg::BatchIndices, "T", "--batch-indices", &Call::batch_indices, &ropegen_call::batch_indices,
   "paged kv_cache: int32 [T], each token's request (< 0: not appended)"},
  {Arg::CachePositions, "cache_positions", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Int32,
   ShapeRule::Vector, Feature::PagedKvCache, Arg::CachePositions, "T", "--cache-positions", &Call::cache_positions,
   &ropegen_call::cache_positions,
   "paged kv_cache: int32 [T], where each token goes in its request's pages when that is not its position"},
  {Arg::SlotMapping, "slot_mapping", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::Int32,
   ShapeRule::Vector, Feature::ContiguousKvCache, Arg::SlotMapping, "T", "--slot-mapping", &Call::slot_mapping, &ropegen_call::slot_mapping,
   "contiguous kv_cache: int32 [T], each token's slot (< 0: not appended)"},
  {Arg::SavedQ, "saved_q", nullptr, nullptr, ArgKind::Rows, Direction::In, DtypeRule::Spec, ShapeRule::Layout,
   Feature::SavedInputs, Arg::SavedQ, nullptr, "--saved-q", &Call::saved_q, &ropegen_call::saved_q,
   "backward with run-time frequencies or qk_norm: the forward's q"},
  {Arg::SavedK, "saved_k", nullptr, nullptr, ArgKind::Rows, Direction::In, DtypeRule::Spec, ShapeRule::Layout,
   Feature::SavedInputs, Arg::SavedK, nullptr, "--saved-k", &Call::saved_k, &ropegen_call::saved_k,
   "backward with run-time frequencies or qk_norm: the forward's k"},
  {Arg::QNormWeight, "q_norm_weight", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::SpecOrFloat32,
   ShapeRule::Vector, Feature::QkNormWeight, Arg::QNormWeight, "head_dim", "--q-norm-weight", &Call::q_norm_weight,
   &ropegen_call::q_norm_weight, "qk_norm weight per_head: q's norm weight [head_dim] in the spec's dtype or float32"},
  {Arg::KNormWeight, "k_norm_weight", nullptr, nullptr, ArgKind::Whole, Direction::In, DtypeRule::SpecOrFloat32,
   ShapeRule::Vector, Feature::QkNormWeight, Arg::KNormWeight, "head_dim", "--k-norm-weight", &Call::k_norm_weight,
   &ropegen_call::k_norm_weight, "qk_norm weight per_head: k's norm weight [head_dim] in the spec's dtype or float32, as q's (with k)"},
  {Arg::OutQ, "out_q", "out", "out_x", ArgKind::Rows, Direction::Out, DtypeRule::Output, ShapeRule::Layout,
   Feature::Always, Arg::Q, nullptr, "--out-q", &Call::out_q, &ropegen_call::out_q,
   "where rotated q goes, shaped like q (absent: in place; backward: dL/dq); other encodings: the result"},
  {Arg::OutK, "out_k", nullptr, nullptr, ArgKind::Rows, Direction::Out, DtypeRule::Output, ShapeRule::Layout,
   Feature::Rope, Arg::K, nullptr, "--out-k", &Call::out_k, &ropegen_call::out_k,
   "where rotated k goes, shaped like k (absent: in place; backward: dL/dk)"},
  {Arg::KCache, "k_cache", nullptr, nullptr, ArgKind::Whole, Direction::InOut, DtypeRule::KvCache, ShapeRule::KvCache,
   Feature::KvCache, Arg::KCache, nullptr, "--k-cache", &Call::k_cache, &ropegen_call::k_cache,
   "kv_cache specs: the k cache in the kv_cache layout and dtype, updated at the tokens' entries"},
  {Arg::VCache, "v_cache", nullptr, nullptr, ArgKind::Whole, Direction::InOut, DtypeRule::KvCache, ShapeRule::KvCache,
   Feature::KvCache, Arg::VCache, nullptr, "--v-cache", &Call::v_cache, &ropegen_call::v_cache,
   "kv_cache specs: the v cache (its rows Dv long), updated at the tokens' entries"},
  {Arg::DFreqs, "d_freqs", nullptr, nullptr, ArgKind::Whole, Direction::Out, DtypeRule::Float32, ShapeRule::Vector,
   Feature::FrequencyGradient, Arg::Freqs, "pairs", "--out-freqs", &Call::d_freqs, &ropegen_call::d_freqs,
   "backward with run-time frequencies: receives dL/d(inv_freq), float32 [rotary_dim / 2]"},
  {Arg::DQNormWeight, "d_q_norm_weight", nullptr, nullptr, ArgKind::Whole, Direction::Out, DtypeRule::Float32,
   ShapeRule::Vector, Feature::QkNormGradient, Arg::QNormWeight, "head_dim", "--out-q-norm-weight",
   &Call::d_q_norm_weight, &ropegen_call::d_q_norm_weight,
   "backward of qk_norm weight per_head: receives dL/d(q_norm_weight), float32 [head_dim]"},
  {Arg::DKNormWeight, "d_k_norm_weight", nullptr, nullptr, ArgKind::Whole, Direction::Out, DtypeRule::Float32,
   ShapeRule::Vector, Feature::QkNormGradient, Arg::KNormWeight, "head_dim", "--out-k-norm-weight",
   &Call::d_k_norm_weight, &ropegen_call::d_k_norm_weight,
   "backward of qk_norm weight per_head: receives dL/d(k_norm_weight), float32 [head_dim] (with k)"},
  {Arg::OutScales, "out_scales", nullptr, nullptr, ArgKind::Rows, Direction::Out, DtypeRule::Float32, ShapeRule::Layout,
   Feature::OutputQuant, Arg::Q, "head_dim / group", "--out-scales", &Call::out_scales, &ropegen_call::out_scales,
   "output_quant: q's group scales, float32 shaped as q with head_dim / group in the last dim (code x scale ~ x)"},
  {Arg::Offset, "offset", nullptr, nullptr, ArgKind::Int64, Direction::In, DtypeRule::Scalar, ShapeRule::Scalar,
   Feature::Always, Arg::Offset, nullptr, "--offset", nullptr, nullptr, "implicit positions: the first token's position"},
  {Arg::SeqLen, "seq_len", nullptr, nullptr, ArgKind::Int64, Direction::In, DtypeRule::Scalar, ShapeRule::Scalar,
   Feature::SequenceLength, Arg::SeqLen, nullptr, "--seq-len", nullptr, nullptr,
   "the sequence length the frequencies see (dynamic NTK, LongRoPE, xPos); default: max position + 1"},
  {Arg::QScale, "q_scale", nullptr, nullptr, ArgKind::Float32, Direction::In, DtypeRule::Scalar, ShapeRule::Scalar,
   Feature::Fp8Output, Arg::QScale, nullptr, "--q-scale", nullptr, nullptr,
   "output_dtype fp8: out_q holds the codes of rotated q / q_scale (x q_scale with fp8_scale: multiply)"},
  {Arg::KScale, "k_scale", nullptr, nullptr, ArgKind::Float32, Direction::In, DtypeRule::Scalar, ShapeRule::Scalar,
   Feature::Fp8KCodes, Arg::KScale, nullptr, "--k-scale", nullptr, nullptr,
   "fp8 kv_cache or output_dtype fp8: k_cache (out_k) holds the codes of rotated k / k_scale (x k_scale with fp8_scale: "
   "multiply)"},
  {Arg::VScale, "v_scale", nullptr, nullptr, ArgKind::Float32, Direction::In, DtypeRule::Scalar, ShapeRule::Scalar,
   Feature::Fp8KvCache, Arg::VScale, nullptr, "--v-scale", nullptr, nullptr,
   "fp8 kv_cache: v_cache holds the codes of v / v_scale (x v_scale with fp8_scale: multiply)"},
  {Arg::PoolThreads, "pool_threads", nullptr, nullptr, ArgKind::Int64, Direction::In, DtypeRule::Scalar,
   ShapeRule::Scalar, Feature::CpuSchedule, Arg::PoolThreads, nullptr, nullptr, nullptr, nullptr,
   "the size of the Halide thread pool that runs the kernel (from its runtime, not the call)"},
}};
// clang-format on

constexpr const ArgumentInfo& info(Arg a) { return kArguments[index(a)]; }

// The gradients summed over every row of a call (d_freqs, d_q_norm_weight,
// d_k_norm_weight): written whole by every part, which the caller adds up.
constexpr bool is_summed_gradient(Arg a) {
  return info(a).kind == ArgKind::Whole && info(a).direction == Direction::Out;
}

// The table's rows are in the enum's order (checked at compile time).
constexpr bool rows_in_order() {
  for (int i = 0; i < kArgCount; ++i)
    if (index(kArguments[i].arg) != i) return false;
  return true;
}
static_assert(rows_in_order(), "kArguments must list the arguments in Arg's order");

// The argument a name denotes, either spelling (nullopt: none).
constexpr std::optional<Arg> argument_named(std::string_view name) {
  for (const ArgumentInfo& a : kArguments)
    if (name == a.name || (a.single_name && name == a.single_name) ||
        (a.kernel_single_name && name == a.kernel_single_name))
      return a.arg;
  return std::nullopt;
}

// The name an argument has for a spec's users: "x" and "out" for the
// single-tensor encodings' tensor and result.
constexpr const char* user_name(Arg a, bool single_tensor) {
  return single_tensor && info(a).single_name ? info(a).single_name : info(a).name;
}

// A fixed-size array indexed by the tensor arguments.
template <typename T>
struct ByTensor {
  std::array<T, kTensorArgCount> items{};
  T& operator[](Arg a) { return items[index(a)]; }
  const T& operator[](Arg a) const { return items[index(a)]; }
};

// A scalar argument's value as a kernel takes it (the address of the
// member its kind names is what a compiled entry point is passed).
union ScalarValue {
  int64_t i64;
  float f32;
};

inline ScalarValue float_value(float f) {
  ScalarValue v;
  v.f32 = f;
  return v;
}

// Every scalar argument's value; the defaults a call that gives none gets.
struct Scalars {
  std::array<ScalarValue, kArgCount - kTensorArgCount> items = {
      ScalarValue{0},                                           // offset
      ScalarValue{1},                                           // seq_len
      float_value(1.0f), float_value(1.0f), float_value(1.0f),  // q_scale, k_scale, v_scale
      ScalarValue{1},                                           // pool_threads
  };
  ScalarValue& operator[](Arg a) { return items[index(a) - kTensorArgCount]; }
  const ScalarValue& operator[](Arg a) const { return items[index(a) - kTensorArgCount]; }
};

// The tensor arguments in order, for range-for loops.
struct TensorArgs {
  struct Iterator {
    int i;
    Arg operator*() const { return static_cast<Arg>(i); }
    Iterator& operator++() { return ++i, *this; }
    bool operator!=(const Iterator& o) const { return i != o.i; }
  };
  Iterator begin() const { return {0}; }
  Iterator end() const { return {kTensorArgCount}; }
};
inline constexpr TensorArgs kTensorArgs{};

}  // namespace ropegen::abi
