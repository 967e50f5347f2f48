// The validated, normalised RoPE spec: what every later stage consumes.
// A RopeSpec only ever comes out of ropegen::load_spec / parse_spec, so all
// defaults are filled and every invariant in the README's spec reference holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ropegen {

enum class Encoding { Rope };
enum class Pairing { Half, Interleaved };
enum class Layout { BSHD, BHSD, SBHD, THD };
enum class DType { F32, F16, BF16 };
enum class FrequencyScheme { Lang, Pixel, Constant, Custom };
enum class ScalingType { None, Linear, Ntk, Dynamic, Yarn, LongRope, Llama3 };
enum class LongRopePolicy { PerCall, Long, Short };
enum class PositionsMode { Implicit, Explicit };

struct Frequency {
  FrequencyScheme scheme = FrequencyScheme::Lang;
  double theta = 10000.0;           // lang
  double max_freq = 10.0;           // pixel
  double value = 1.0;               // constant
  std::vector<double> values;       // custom: rotary_dim / 2 entries
};

struct Scaling {
  ScalingType type = ScalingType::None;
  double factor = 1.0;
  int64_t original_max_position = 0;       // dynamic, yarn, longrope, llama3
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  bool truncate = true;
  // yarn, longrope: overrides the derived attention factor
  std::optional<double> attention_factor;
  // longrope
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  LongRopePolicy policy = LongRopePolicy::PerCall;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
};

struct XPos {
  bool enabled = false;
  double scale_base = 512.0;
};

struct RopeSpec {
  std::string name;
  Encoding encoding = Encoding::Rope;
  int head_dim = 0;
  int rotary_dim = 0;       // even, 2..head_dim - rotary_offset
  int rotary_offset = 0;    // first rotated dim
  Pairing pairing = Pairing::Half;
  // Where the rotated members are written; differs from `pairing` only for
  // DeepSeek-V3 (HF rope_interleave: read (2i, 2i+1), write (i, i + d/2)).
  Pairing output_pairing = Pairing::Half;
  Layout layout = Layout::BSHD;
  DType dtype = DType::F32;
  Frequency frequency;
  Scaling scaling;
  XPos xpos;
  PositionsMode positions = PositionsMode::Implicit;

  int num_pairs() const { return rotary_dim / 2; }
  // Whether the frequencies depend on the run-time sequence length.
  bool needs_seq_len() const {
    return scaling.type == ScalingType::Dynamic || xpos.enabled ||
           (scaling.type == ScalingType::LongRope && scaling.policy == LongRopePolicy::PerCall);
  }
};

// Spellings used in spec files, the normalised form and manifests.
const char* to_string(Encoding);
const char* to_string(Pairing);
const char* to_string(Layout);
const char* to_string(DType);
const char* to_string(FrequencyScheme);
const char* to_string(ScalingType);
const char* to_string(LongRopePolicy);
const char* to_string(PositionsMode);

// The dims of a tensor in a layout, for messages and docs: "[B, S, H, D]".
const char* layout_dims(Layout);

}  // namespace ropegen
