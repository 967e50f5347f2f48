// The canonical text of a spec: written field by field (not through a YAML
// emitter) so key order and number spelling are fixed; numbers use the
// shortest form that round-trips.
#include <cstdint>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/hash.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

std::string number_list(const std::vector<double>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

void append_scaling(std::string& out, const Scaling& s) {
  out += fmt::format("scaling:\n  type: {}\n", to_string(s.type));
  auto field = [&out](const char* key, const auto& value) { out += fmt::format("  {}: {}\n", key, value); };
  auto optional = [&](const char* key, const std::optional<double>& v) {
    if (v) field(key, *v);
  };
  switch (s.type) {
    case ScalingType::None: break;
    case ScalingType::Linear:
    case ScalingType::Ntk: field("factor", s.factor); break;
    case ScalingType::Dynamic:
      field("factor", s.factor);
      field("original_max_position", s.original_max_position);
      break;
    case ScalingType::Yarn:
      field("factor", s.factor);
      field("original_max_position", s.original_max_position);
      field("beta_fast", s.beta_fast);
      field("beta_slow", s.beta_slow);
      optional("mscale", s.mscale);
      optional("mscale_all_dim", s.mscale_all_dim);
      optional("attention_factor", s.attention_factor);
      field("truncate", s.truncate ? "true" : "false");
      break;
    case ScalingType::LongRope:
      field("factor", s.factor);
      field("original_max_position", s.original_max_position);
      optional("attention_factor", s.attention_factor);
      field("policy", to_string(s.policy));
      field("short_factor", number_list(s.short_factor));
      field("long_factor", number_list(s.long_factor));
      break;
    case ScalingType::Llama3:
      field("factor", s.factor);
      field("original_max_position", s.original_max_position);
      field("low_freq_factor", s.low_freq_factor);
      field("high_freq_factor", s.high_freq_factor);
      break;
  }
}

void append_frequency(std::string& out, const Frequency& f) {
  out += fmt::format("frequency:\n  scheme: {}\n", to_string(f.scheme));
  switch (f.scheme) {
    case FrequencyScheme::Lang: out += fmt::format("  theta: {}\n", f.theta); break;
    case FrequencyScheme::Pixel: out += fmt::format("  max_freq: {}\n", f.max_freq); break;
    case FrequencyScheme::Constant: out += fmt::format("  value: {}\n", f.value); break;
    case FrequencyScheme::Custom: out += fmt::format("  values: {}\n", number_list(f.values)); break;
    case FrequencyScheme::Runtime:
    case FrequencyScheme::Table: break;
  }
}

void append_rope(std::string& out, const RopeSpec& spec) {
  out += fmt::format("head_dim: {}\n", spec.head_dim);
  out += fmt::format("rotary_dim: {}\n", spec.rotary_dim);
  out += fmt::format("rotary_offset: {}\n", spec.rotary_offset);
  out += fmt::format("pairing: {}\n", to_string(spec.pairing));
  out += fmt::format("output_pairing: {}\n", to_string(spec.output_pairing));
  out += fmt::format("layout: {}\n", to_string(spec.layout));
  out += fmt::format("dtype: {}\n", to_string(spec.dtype));
  append_frequency(out, spec.frequency);
  append_scaling(out, spec.scaling);
  if (spec.xpos.enabled) out += fmt::format("xpos:\n  scale_base: {}\n", spec.xpos.scale_base);
  out += fmt::format("positions: {}\n", to_string(spec.positions));
  // Absent for 1-D positions, so those specs keep the text (and hash) they always had.
  if (spec.axes.enabled())
    out += fmt::format("axes:\n  sections: [{}]\n  interleaved: {}\n  per_axis_frequencies: {}\n",
                       fmt::join(spec.axes.sections, ", "), spec.axes.interleaved, spec.axes.per_axis_frequencies);
  // Absent without the fused append, likewise.
  if (spec.kv_cache.enabled) {
    const KvCache& kv = spec.kv_cache;
    out += fmt::format("kv_cache:\n  layout: {}\n", to_string(kv.layout));
    if (kv.layout != KvLayout::Contiguous) out += fmt::format("  page_size: {}\n", kv.page_size);
    out += fmt::format("  dtype: {}\n", to_string(kv.dtype));
    if (kv.is_fp8()) out += "  scale: per_tensor\n";
  }
  if (spec.qk_norm.enabled)
    out += fmt::format("qk_norm:\n  type: {}\n  eps: {}\n  weight: {}\n", to_string(spec.qk_norm.type),
                       spec.qk_norm.eps, to_string(spec.qk_norm.weight));
  if (spec.has_fp8_output()) out += fmt::format("output_dtype: {}\n", to_string(spec.output_dtype));
  if (spec.output_quant.enabled)
    out += fmt::format("output_quant:\n  group: {}\n  scale: {}\n", spec.output_quant.group,
                       to_string(spec.output_quant.scale));
  // Absent for the default, so specs without it keep their text (and hash).
  if (spec.fp8_scale != Fp8Scale::Divide) out += fmt::format("fp8_scale: {}\n", to_string(spec.fp8_scale));
}

// sinusoidal and learned: the rows the table is added to.
void append_rows(std::string& out, const RopeSpec& spec) {
  out += fmt::format("layout: {}\ndtype: {}\npositions: {}\n", to_string(spec.layout), to_string(spec.dtype),
                     to_string(spec.positions));
}

}  // namespace

std::string to_yaml(const RopeSpec& spec) {
  std::string out = fmt::format("name: {}\nencoding: {}\n", spec.name, to_string(spec.encoding));
  switch (spec.encoding) {
    case Encoding::Rope: append_rope(out, spec); break;
    case Encoding::Sinusoidal:
      out += fmt::format("dim: {}\nbase: {}\ntable_form: {}\n", spec.dim, spec.base, to_string(spec.table_form));
      append_rows(out, spec);
      break;
    case Encoding::Learned:
      out += fmt::format("dim: {}\n", spec.dim);
      append_rows(out, spec);
      break;
    case Encoding::Alibi:
      out += fmt::format("num_heads: {}\nform: {}\ndtype: {}\n", spec.num_heads, to_string(spec.alibi_form),
                         to_string(spec.dtype));
      break;
  }
  return out;
}

std::string spec_hash(const RopeSpec& spec) {
  return base::hash_hex(to_yaml(spec));
}

}  // namespace ropegen
