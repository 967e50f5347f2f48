// `rope-gen explain --json`: the keys of the contract first (name,
// encoding, rotary_dim, attention_factor, attention_factor_source,
// original_max_position, pairs, precision), then what docs/explain.md adds.
#include <cmath>

#include <nlohmann/json.hpp>

#include "ropegen/rope_explain.h"

namespace ropegen {
namespace {

using Json = nlohmann::ordered_json;

// JSON has no infinity: a zero frequency's wavelength is null.
Json finite_or_null(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

Json optional_json(const std::optional<int64_t>& x) { return x ? Json(*x) : Json(nullptr); }

Json pair_json(const PairExplanation& p, ScalingType scaling) {
  Json j;
  j["index"] = p.index;
  j["inv_freq"] = p.inv_freq;
  j["inv_freq_unscaled"] = p.inv_freq_unscaled;
  j["wavelength"] = finite_or_null(p.wavelength);
  j["regime"] = to_string(p.scaling.regime);
  j["axis"] = p.axis ? Json(*p.axis) : Json(nullptr);
  // llama3 smooth, yarn gamma, longrope / linear divisor, ntk / dynamic base.
  j["regime_value"] = scaling == ScalingType::None ? Json(nullptr) : Json(p.scaling.value);
  j["turns"] = p.turns;
  j["full_turn"] = p.turns >= 1;
  if (p.columns) j["columns"] = {p.columns->first, p.columns->second < 0 ? Json(nullptr) : Json(p.columns->second)};
  return j;
}

void put_errors(Json& j, const TrigErrors& e) {
  j["f32_angle"] = e.f32_angle;
  j["bf16_table"] = e.bf16_table;
  j["f16_table"] = e.f16_table;
  j["rope_gen"] = e.rope_gen ? Json(*e.rope_gen) : Json(nullptr);
}

Json precision_json(const Precision& p) {
  Json j;
  j["max_pos"] = p.max_pos;
  put_errors(j, p.max_error);
  j["positions_checked"] = p.positions_checked;
  j["sampled"] = p.sampled;
  if (!p.rope_gen_note.empty()) j["rope_gen_note"] = p.rope_gen_note;
  Json bins = Json::array();
  for (const PrecisionBin& b : p.by_position) {
    Json bin;
    bin["first"] = b.first;
    bin["last"] = b.last;
    put_errors(bin, b.max_error);
    bins.push_back(bin);
  }
  j["by_position"] = bins;
  return j;
}

}  // namespace

std::string explanation_json(const Explanation& e) {
  Json j;
  j["name"] = e.name;
  j["encoding"] = to_string(e.encoding);
  j["rotary_dim"] = e.rotary_dim;
  j["attention_factor"] = e.attention_factor;
  j["attention_factor_source"] = e.attention_factor_source;
  j["original_max_position"] = optional_json(e.original_max_position);
  Json pairs = Json::array();
  for (const PairExplanation& p : e.pairs) pairs.push_back(pair_json(p, e.scaling));
  j["pairs"] = pairs;
  j["precision"] = e.precision ? precision_json(*e.precision) : Json(nullptr);
  j["scaling"] = to_string(e.scaling);
  j["factor"] = e.factor;
  j["seq_len"] = optional_json(e.seq_len);
  j["max_pos"] = e.max_pos;
  j["context"] = e.context;
  j["context_source"] = e.context_source;
  j["extended_context"] = optional_json(e.extended_context);
  if (!e.alibi_slopes.empty()) j["alibi_slopes"] = e.alibi_slopes;
  j["notes"] = e.notes;
  return j.dump();
}

}  // namespace ropegen
