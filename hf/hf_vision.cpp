#include "hf_vision.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "hf_json.h"
#include "ropegen/spec_io.h"

namespace ropegen::hf {

extern const char* const kHfVisionJson;

namespace {

using json = nlohmann::json;

// The towers (tools/hf_config/hf_vision.json, measured from transformers by
// tests/golden/hf_vision_cases.py): vision model_type -> {model_type, hf_code,
// size_key, reads_head_dim, rope_type, pairing, frequencies, ids}.
const json& vision_table() {
  static const json table = json::parse(kHfVisionJson);
  return table;
}

const json& towers() { return vision_table().at("towers"); }

std::string towers_version() { return vision_table().at("transformers").get<std::string>(); }

std::string known_towers() {
  std::string out;
  for (auto& [type, t] : towers().items())
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", type, t.at("model_type").get<std::string>());
  return out;
}

class VisionImporter {
 public:
  VisionImporter(const json& config, std::string file, const HfImportOptions& options)
      : outer_(config), file_(std::move(file)), options_(options), r_(file_, &errors_) {}

  Result<HfImport> run() {
    if (!outer_.is_object()) return named_error(file_, "a Hugging Face config must be a JSON object");
    find_tower();
    if (!errors_.empty()) return errors_;
    const std::optional<int> head = head_size();
    const std::optional<double> theta = rope_theta();
    if (!errors_.empty()) return errors_;
    write_spec(*head, *theta);
    std::vector<std::pair<const json*, std::string>> configs = {{v_, where_}};
    if (v_ != &outer_) configs.push_back({&outer_, ""});
    set_hf_dtype(r_, configs, out_);
    if (!errors_.empty()) return errors_;
    return validated_import(std::move(out_), file_);
  }

 private:
  // vision_config, or the config itself when it is a tower's own (a standalone Pixtral config).
  void find_tower() {
    model_type_ = r_.string(outer_, "", "model_type").value_or("");
    const std::string& model_type = model_type_;
    if (const json* vision = r_.object(outer_, "", "vision_config")) {
      v_ = vision;
      where_ = "vision_config.";
    } else if (errors_.empty() && !towers().contains(model_type)) {
      r_.error(fmt::format("vision: this config (model_type `{}`) has no `vision_config`; vision converts the "
                           "vision tower of a multimodal config", model_type.empty() ? "(none)" : model_type));
      return;
    }
    const std::string vision_type = r_.string(*v_, where_, "model_type").value_or("");
    for (auto& [type, t] : towers().items()) {
      if (vision_type.empty() ? model_type == t.at("model_type") : vision_type == type) {
        tower_ = &t;
        tower_type_ = type;
      }
    }
    if (!tower_ && errors_.empty())
      r_.error(fmt::format("vision: vision tower `{}` (model_type `{}`) is not one whose 2D RoPE rope-gen has "
                           "checked against transformers; it converts {}",
                           vision_type.empty() ? "(vision_config.model_type not given)" : vision_type,
                           model_type.empty() ? "(none)" : model_type, known_towers()));
  }

  // HF: head_dim where the module reads it, else size_key // num_attention_heads (`num_heads` in Qwen's files).
  std::optional<int> head_size() {
    const bool reads_head_dim = tower_->at("reads_head_dim").get<bool>();
    const std::string size_key = tower_->at("size_key").get<std::string>();
    std::optional<int> head = reads_head_dim ? r_.positive_int(*v_, where_, "head_dim") : std::nullopt;
    if (!head) {
      const std::optional<int> size = r_.positive_int(*v_, where_, size_key.c_str());
      std::optional<int> heads = r_.positive_int(*v_, where_, "num_attention_heads");
      if (!heads) heads = r_.positive_int(*v_, where_, "num_heads");
      if (!size || !heads) {
        r_.error(fmt::format("vision: cannot tell the {} head size: `{}{}` needs {}`{}{}` and "
                             "`{}num_attention_heads` (or `num_heads`)", tower_type_, where_,
                             reads_head_dim ? "head_dim" : size_key, reads_head_dim ? "or " : "", where_, size_key,
                             where_));
        return std::nullopt;
      }
      head = *size / *heads;
    }
    if (*head % 4 != 0) {
      r_.error(fmt::format("vision: the {} head size {} is not a multiple of 4; HF's 2D RoPE gives each of h and w "
                           "head_dim / 4 pairs", tower_type_, *head));
      return std::nullopt;
    }
    return head;
  }

  // rope_parameters.rope_theta (5.x), rope_theta (4.x), else HF's default 10000 (every listed class's).
  std::optional<double> rope_theta() {
    const json* rp = r_.object(*v_, where_, "rope_parameters");
    const std::string rp_where = where_ + "rope_parameters.";
    if (rp) {
      const std::optional<std::string> type = r_.string(*rp, rp_where, "rope_type");
      const std::string& supported = tower_->at("rope_type").get_ref<const std::string&>();
      if (type && *type != supported)
        r_.error(fmt::format("`{}rope_type` `{}`: transformers' {} supports only `{}`", rp_where, *type,
                             tower_->at("hf_code").get<std::string>(), supported));
    }
    std::optional<double> theta = rp ? r_.number(*rp, rp_where, "rope_theta") : std::nullopt;
    if (!theta) theta = r_.number(*v_, where_, "rope_theta");
    if (theta && !(*theta > 1)) {
      r_.error(fmt::format("`{}rope_theta` must be > 1, not {}", where_, *theta));
      return std::nullopt;
    }
    if (!theta) out_.notes.push_back("rope_theta 10000: the vision config names none (HF's default)");
    return theta.value_or(10000.0);
  }

  void write_spec(int head, double theta) {
    RopeSpec& s = out_.spec;
    s.name = spec_name(options_,
                       (model_type_.empty() ? tower_->at("model_type").get<std::string>() : model_type_) +
                           (v_ == &outer_ ? "" : "_vision"),
                       r_);
    s.head_dim = s.rotary_dim = head;
    s.frequency.theta = theta;
    s.positions = PositionsMode::Explicit;
    s.axes.sections = {head / 4, head / 4};
    s.pairing = s.output_pairing = tower_->at("pairing") == "half" ? Pairing::Half : Pairing::Interleaved;
    const std::string frequencies = tower_->at("frequencies").get<std::string>();
    if (frequencies == "per_axis") {
      // Each axis: theta^(-2j/(d/2)) over its d/4 pairs.
      s.axes.per_axis_frequencies = true;
    } else if (frequencies == "even_then_odd") {
      // theta^(-2i/d), even i on the first axis and odd i on the second: one frequency list over both.
      s.frequency.scheme = FrequencyScheme::Custom;
      for (int parity : {0, 1})
        for (int i = parity; i < head / 2; i += 2) s.frequency.values.push_back(std::pow(theta, -2.0 * i / head));
      out_.notes.push_back(fmt::format("frequencies theta^(-2i/{}): even i on the first axis, odd i on the second",
                                       head));
    } else {
      throw std::logic_error("hf_vision.json: frequency layout `" + frequencies + "` unknown to from-hf");
    }
    out_.notes.push_back(fmt::format("vision tower `{}`: 2D RoPE of transformers {} {}, {} pairs per axis{}",
                                     tower_type_, towers_version(), tower_->at("hf_code").get<std::string>(),
                                     head / 4, s.axes.per_axis_frequencies ? ", each axis with its own frequencies" : ""));
    out_.notes.push_back(fmt::format("positions: explicit, [..., 2] = {}", tower_->at("ids").get<std::string>()));
  }

  const json& outer_;
  const json* v_ = &outer_;
  std::string where_;
  std::string file_;
  const HfImportOptions& options_;
  std::vector<Diagnostic> errors_;
  JsonReader r_;
  std::string model_type_;
  const json* tower_ = nullptr;
  std::string tower_type_;  // its vision model_type
  HfImport out_;
};

}  // namespace

Result<HfImport> spec_from_hf_vision_config(const json& config, const std::string& file,
                                            const HfImportOptions& options) {
  return VisionImporter(config, file, options).run();
}

}  // namespace ropegen::hf
