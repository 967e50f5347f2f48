#include "hf_vision.h"

#include <cctype>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "hf_json.h"
#include "hf_models.h"
#include "ropegen/spec_io.h"

namespace ropegen::cli {
namespace {

using json = nlohmann::json;

// How a tower lays out its frequencies over the head (d = head size, d/4 pairs per axis).
enum class Layout {
  // Qwen2-VL family: inv_freq theta^(-2j/(d/2)) (d/4 of them), cos/sin [h | w | h | w]: rotate_half over the head.
  QwenAxial,
  // Pixtral: inv_freq theta^(-2i/d) split [even i | odd i] between h and w, cos/sin [h | w | h | w], rotate_half.
  Pixtral,
  // Llama 4: theta^(-2j/(d/2)) at (column + 1) on the first d/4 complex pairs, (row + 1) on the rest, CLS 0.
  Llama4,
};

struct Tower {
  const char* vision_type;  // vision_config.model_type
  const char* model_type;   // the multimodal model_type whose vision_config may omit it
  Layout layout;
  const char* hf_code;      // the rotary module and apply function the tower's attention calls
  const char* size_key;     // the head is size_key // heads (HF: head_dim first where `reads_head_dim`)
  bool reads_head_dim;
  const char* rope_type;    // the rope_type HF's module accepts
};

// Checked against transformers 5.23.0 by tests/golden/hf_vision_cases.py (tests/cli/hf_vision_test.cpp).
constexpr Tower kTowers[] = {
    {"qwen2_vl_vision", "qwen2_vl", Layout::QwenAxial, "Qwen2VLVisionRotaryEmbedding + apply_rotary_pos_emb_vision",
     "embed_dim", true, "axial"},
    {"qwen2_5_vl_vision", "qwen2_5_vl", Layout::QwenAxial,
     "Qwen2_5_VLVisionRotaryEmbedding + apply_rotary_pos_emb_vision", "hidden_size", true, "axial"},
    {"qwen3_vl_vision", "qwen3_vl", Layout::QwenAxial, "Qwen3VLVisionRotaryEmbedding + apply_rotary_pos_emb_vision",
     "hidden_size", true, "axial"},
    {"qwen3_vl_moe_vision", "qwen3_vl_moe", Layout::QwenAxial,
     "Qwen3VLMoeVisionRotaryEmbedding + apply_rotary_pos_emb_vision", "hidden_size", true, "axial"},
    {"pixtral", "mistral3", Layout::Pixtral, "PixtralVisionRotaryEmbedding + apply_rotary_pos_emb", "hidden_size",
     true, "axial"},
    {"llama4_vision_model", "llama4", Layout::Llama4, "Llama4VisionRotaryEmbedding + vision_apply_rotary_emb",
     "hidden_size", false, "default"},
};

std::string known_towers() {
  std::string out;
  for (const Tower& t : kTowers) out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", t.vision_type, t.model_type);
  return out;
}

class VisionImporter {
 public:
  VisionImporter(const json& config, std::string file, const HfImportOptions& options)
      : outer_(config), file_(std::move(file)), options_(options), r_(file_, &errors_) {}

  Result<HfImport> run() {
    if (!outer_.is_object()) return Diagnostic{{file_, -1, -1}, "a Hugging Face config must be a JSON object", {}};
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
    Result<RopeSpec> checked = parse_spec(to_yaml(out_.spec), file_ + " (converted)");
    if (!checked) return checked.errors();
    out_.spec = *checked;
    return out_;
  }

 private:
  // vision_config, or the config itself for a standalone Pixtral vision config.
  void find_tower() {
    model_type_ = r_.string(outer_, "", "model_type").value_or("");
    const std::string& model_type = model_type_;
    if (const json* vision = r_.object(outer_, "", "vision_config")) {
      v_ = vision;
      where_ = "vision_config.";
    } else if (errors_.empty() && model_type != "pixtral") {
      r_.error(fmt::format("--vision: this config (model_type `{}`) has no `vision_config`; --vision converts the "
                           "vision tower of a multimodal config", model_type.empty() ? "(none)" : model_type));
      return;
    }
    const std::string vision_type = r_.string(*v_, where_, "model_type").value_or("");
    for (const Tower& t : kTowers)
      if (vision_type.empty() ? model_type == t.model_type : vision_type == t.vision_type) tower_ = &t;
    if (!tower_ && errors_.empty())
      r_.error(fmt::format("--vision: vision tower `{}` (model_type `{}`) is not one whose 2D RoPE rope-gen has "
                           "checked against transformers; it converts {}",
                           vision_type.empty() ? "(vision_config.model_type not given)" : vision_type,
                           model_type.empty() ? "(none)" : model_type, known_towers()));
  }

  // HF: head_dim where the module reads it, else size_key // num_attention_heads (`num_heads` in Qwen's files).
  std::optional<int> head_size() {
    std::optional<int> head = tower_->reads_head_dim ? r_.positive_int(*v_, where_, "head_dim") : std::nullopt;
    if (!head) {
      const std::optional<int> size = r_.positive_int(*v_, where_, tower_->size_key);
      std::optional<int> heads = r_.positive_int(*v_, where_, "num_attention_heads");
      if (!heads) heads = r_.positive_int(*v_, where_, "num_heads");
      if (!size || !heads) {
        r_.error(fmt::format("--vision: cannot tell the {} head size: `{}{}` needs {}`{}{}` and "
                             "`{}num_attention_heads` (or `num_heads`)", tower_->vision_type, where_,
                             tower_->reads_head_dim ? "head_dim" : tower_->size_key,
                             tower_->reads_head_dim ? "or " : "", where_, tower_->size_key, where_));
        return std::nullopt;
      }
      head = *size / *heads;
    }
    if (*head % 4 != 0) {
      r_.error(fmt::format("--vision: the {} head size {} is not a multiple of 4; HF's 2D RoPE gives each of h and w "
                           "head_dim / 4 pairs", tower_->vision_type, *head));
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
      if (type && *type != tower_->rope_type)
        r_.error(fmt::format("`{}rope_type` `{}`: transformers' {} supports only `{}`", rp_where, *type,
                             tower_->hf_code, tower_->rope_type));
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
    std::string name = options_.name.value_or((model_type_.empty() ? std::string(tower_->model_type) : model_type_) +
                                            (v_ == &outer_ ? "" : "_vision"));
    for (char& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    s.name = name.substr(0, 64);
    s.head_dim = s.rotary_dim = head;
    s.frequency.theta = theta;
    s.positions = PositionsMode::Explicit;
    s.axes.sections = {head / 4, head / 4};
    s.axes.per_axis_frequencies = tower_->layout != Layout::Pixtral;
    s.pairing = s.output_pairing = tower_->layout == Layout::Llama4 ? Pairing::Interleaved : Pairing::Half;
    std::string ids = "(h, w): the patch's row and column";
    if (tower_->layout == Layout::Pixtral) {
      // theta^(-2i/d), even i to h and odd i to w: one frequency list over both axes.
      s.frequency.scheme = FrequencyScheme::Custom;
      for (int parity : {0, 1})
        for (int i = parity; i < head / 2; i += 2) s.frequency.values.push_back(std::pow(theta, -2.0 * i / head));
      out_.notes.push_back(fmt::format("frequencies theta^(-2i/{}): even i on h, odd i on w (HF's inv_freq_2d)",
                                       head));
    } else if (tower_->layout == Layout::Llama4) {
      ids = "(column + 1, row + 1) of the patch in the image_size / patch_size grid; (0, 0) for the CLS token "
            "(HF gives it frequency 0)";
    }
    out_.notes.push_back(fmt::format("vision tower `{}`: 2D RoPE of transformers {} {}, {} pairs per axis{}",
                                     tower_->vision_type, hf_models().at("transformers").get<std::string>(),
                                     tower_->hf_code, head / 4,
                                     s.axes.per_axis_frequencies ? ", each axis with its own frequencies" : ""));
    out_.notes.push_back(fmt::format("positions: explicit, [..., 2] = {}", ids));
  }

  const json& outer_;
  const json* v_ = &outer_;
  std::string where_;
  std::string file_;
  const HfImportOptions& options_;
  std::vector<Diagnostic> errors_;
  JsonReader r_;
  std::string model_type_;
  const Tower* tower_ = nullptr;
  HfImport out_;
};

}  // namespace

Result<HfImport> spec_from_hf_vision_config(const json& config, const std::string& file,
                                            const HfImportOptions& options) {
  return VisionImporter(config, file, options).run();
}

}  // namespace ropegen::cli
