#include "hf_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ropegen/spec_io.h"

namespace ropegen::cli {
namespace {

using json = nlohmann::json;

// Model files in transformers that rotate interleaved pairs (rotate_every_two
// or a complex multiply on (2i, 2i+1)); every other model uses rotate_half.
const std::set<std::string> kInterleavedModels = {"gptj", "codegen", "deepseek_v2", "roformer", "glm", "chatglm"};
// Models whose HF apply function is known to be rotate_half.
const std::set<std::string> kHalfModels = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text",
    "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe",
    "phi", "phi3", "gpt_neox", "falcon", "stablelm", "olmo", "olmo2", "cohere", "granite", "starcoder2", "internlm2", "persimmon", "mpt", "exaone", "nemotron", "baichuan", "yi", "smollm3", "ministral"};

class Importer {
 public:
  Importer(const json& config, std::string file, const HfImportOptions& options)
      : outer_(config), c_(text_config(config)), file_(std::move(file)), options_(options) {}

  Result<HfImport> run() {
    if (!c_.is_object()) return error("a Hugging Face config must be a JSON object");
    rope_ = rope_parameters();
    if (!errors_.empty()) return errors_;
    model_type_ = string_or(outer_, "model_type", "");
    set_name();
    set_dims();
    set_pairing();
    set_frequency_and_scaling();
    set_axes();
    if (!errors_.empty()) return errors_;
    // The spec text we produce must pass rope-gen's own validation.
    Result<RopeSpec> checked = parse_spec(to_yaml(out_.spec), file_ + " (converted)");
    if (!checked) return checked.errors();
    out_.spec = *checked;
    return out_;
  }

 private:
  Diagnostic error(std::string message) {
    Diagnostic d{{file_, -1, -1}, std::move(message), {}};
    errors_.push_back(d);
    return d;
  }

  // Multimodal models (Qwen3-VL) keep the language model's settings in
  // `text_config`; the model_type that names the model stays outside.
  static const json& text_config(const json& config) {
    auto it = config.find("text_config");
    return it != config.end() && it->is_object() ? *it : config;
  }

  static std::string string_or(const json& j, const char* key, const std::string& fallback) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
  }
  static std::optional<double> number(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  }
  std::optional<double> number_anywhere(const char* key) const {
    if (auto v = number(rope_, key)) return v;
    return number(c_, key);
  }
  double required(const json& j, const char* key, const char* where) {
    if (auto v = number(j, key)) return *v;
    error(fmt::format("{} needs a numeric `{}`", where, key));
    return 0;
  }

  // v5 configs have `rope_parameters` (possibly one per layer type), v4
  // configs `rope_scaling` (null when unscaled).
  json rope_parameters() {
    json rp = json::object();
    for (const char* key : {"rope_parameters", "rope_scaling"}) {
      auto it = c_.find(key);
      if (it != c_.end() && it->is_object()) {
        rp = *it;
        break;
      }
    }
    std::vector<std::string> nested;
    for (auto& [k, v] : rp.items())
      if (v.is_object()) nested.push_back(k);
    if (!nested.empty()) {
      if (!options_.layer_type || !rp.contains(*options_.layer_type)) {
        error(fmt::format("this config has rope parameters per layer type ({}); choose one with --layer-type",
                          fmt::join(nested, ", ")));
        return rp;
      }
      rp = rp[*options_.layer_type];
    }
    return rp;
  }

  void set_name() {
    std::string name = options_.name.value_or(model_type_.empty() ? "model" : model_type_);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) {
      return std::isalnum(ch) ? static_cast<char>(std::tolower(ch)) : '_';
    });
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "m_" + name;
    out_.spec.name = name;
  }

  void set_dims() {
    RopeSpec& s = out_.spec;
    // DeepSeek MLA: only the qk_rope_head_dim trailing dims of each head rotate.
    if (auto rope_dim = number(c_, "qk_rope_head_dim")) {
      const int nope = static_cast<int>(number(c_, "qk_nope_head_dim").value_or(0));
      s.rotary_dim = static_cast<int>(*rope_dim);
      s.rotary_offset = nope;
      s.head_dim = nope + s.rotary_dim;
      out_.notes.push_back(fmt::format("MLA head: {} no-rope dims, then {} rope dims (qk_nope_head_dim, "
                                       "qk_rope_head_dim); apply to the full q head, or set head_dim {} and "
                                       "rotary_offset 0 to apply to q_pe / k_pe alone",
                                       nope, s.rotary_dim, s.rotary_dim));
      return;
    }
    std::optional<double> head = number(c_, "head_dim");
    if (!head) {
      auto hidden = number(c_, "hidden_size");
      if (!hidden) hidden = number(c_, "n_embd");
      if (!hidden) hidden = number(c_, "d_model");
      auto heads = number(c_, "num_attention_heads");
      if (!heads) heads = number(c_, "n_head");
      if (!hidden || !heads || *heads <= 0) {
        error("cannot tell the head size: the config has neither `head_dim` nor `hidden_size` and "
              "`num_attention_heads`");
        return;
      }
      head = std::floor(*hidden / *heads);
    }
    s.head_dim = static_cast<int>(*head);
    // GPT-J / CodeGen give the rotary size directly; others a fraction.
    if (auto rotary = number(c_, "rotary_dim")) {
      s.rotary_dim = static_cast<int>(*rotary);
    } else {
      std::optional<double> partial = number_anywhere("partial_rotary_factor");
      if (!partial) partial = number(c_, "rotary_pct");  // GPT-NeoX
      s.rotary_dim = static_cast<int>(s.head_dim * partial.value_or(1.0));  // HF: int(head_dim * factor)
    }
    if (s.rotary_dim % 2 != 0) {
      out_.notes.push_back(fmt::format("HF's rotary size int(head_dim * partial_rotary_factor) = {} is odd; "
                                       "rounded down to {}", s.rotary_dim, s.rotary_dim - 1));
      s.rotary_dim -= 1;
    }
  }

  void set_pairing() {
    if (kInterleavedModels.count(model_type_)) {
      out_.spec.pairing = out_.spec.output_pairing = Pairing::Interleaved;
      out_.notes.push_back(fmt::format("pairing: interleaved, as transformers' {} model file applies it", model_type_));
    } else if (model_type_ == "deepseek_v3" && c_.value("rope_interleave", true)) {
      out_.spec.pairing = Pairing::Interleaved;
      out_.spec.output_pairing = Pairing::Half;
      out_.notes.push_back("deepseek_v3 with rope_interleave: HF reads pairs (2i, 2i+1) and writes them to "
                           "(i, i + d/2) (apply_rotary_pos_emb_interleave); in-place calls need output_pairing "
                           "interleaved, which gives the same attention scores");
    } else if (!kHalfModels.count(model_type_)) {
      out_.notes.push_back(fmt::format("pairing: half (HF's rotate_half) assumed for model_type `{}`; check its "
                                       "apply_rotary_pos_emb (rotate_every_two means interleaved)",
                                       model_type_.empty() ? "?" : model_type_));
    }
  }

  void set_frequency_and_scaling() {
    RopeSpec& s = out_.spec;
    Scaling& sc = s.scaling;
    std::optional<double> theta = number(rope_, "rope_theta");
    for (const char* key : {"rope_theta", "rotary_emb_base", "rope_embedding_base"})
      if (!theta) theta = number(c_, key);
    s.frequency.theta = theta.value_or(10000.0);
    if (!theta) out_.notes.push_back("no rope_theta in the config: 10000 (HF's default)");

    std::string type = string_or(rope_, "rope_type", string_or(rope_, "type", "default"));
    if (type == "su") type = "longrope";  // old Phi-3 spelling
    const std::optional<double> max_pos = number(c_, "max_position_embeddings");
    // HF moves a top-level original_max_position_embeddings (Phi-3) into the
    // rope parameters, ahead of the one already there.
    std::optional<double> original = number(c_, "original_max_position_embeddings");
    if (!original) original = number(rope_, "original_max_position_embeddings");
    if (!original && (type == "yarn" || type == "longrope" || type == "llama3")) original = max_pos;
    const std::string where = fmt::format("rope type `{}`", type);

    if (type == "default" || type == "mrope") {  // mrope: the sections are read by set_axes
      sc.type = ScalingType::None;
    } else if (type == "linear") {
      sc.type = ScalingType::Linear;
      sc.factor = required(rope_, "factor", where.c_str());
    } else if (type == "dynamic") {
      sc.type = ScalingType::Dynamic;
      sc.factor = required(rope_, "factor", where.c_str());
      // HF's dynamic NTK divides by max_position_embeddings, not the original.
      sc.original_max_position = static_cast<int64_t>(required(c_, "max_position_embeddings", "dynamic scaling"));
    } else if (type == "yarn" || type == "longrope") {
      sc.type = type == "yarn" ? ScalingType::Yarn : ScalingType::LongRope;
      if (!original) error(fmt::format("{} needs original_max_position_embeddings or max_position_embeddings", where));
      sc.original_max_position = static_cast<int64_t>(original.value_or(1));
      if (auto f = number(rope_, "factor")) {
        sc.factor = *f;
      } else if (max_pos && original) {
        sc.factor = *max_pos / *original;  // HF: max_position_embeddings / original
        out_.notes.push_back(fmt::format("factor {} = max_position_embeddings / original_max_position_embeddings",
                                         sc.factor));
      } else {
        error(fmt::format("{} needs `factor` or max_position_embeddings", where));
      }
      sc.attention_factor = number(rope_, "attention_factor");
      if (sc.type == ScalingType::Yarn) {
        // HF: `beta_fast or 32`: zero or absent means the default.
        if (auto b = number(rope_, "beta_fast"); b && *b != 0) sc.beta_fast = *b;
        if (auto b = number(rope_, "beta_slow"); b && *b != 0) sc.beta_slow = *b;
        sc.mscale = number(rope_, "mscale");
        sc.mscale_all_dim = number(rope_, "mscale_all_dim");
        if (auto t = rope_.find("truncate"); t != rope_.end() && t->is_boolean()) sc.truncate = t->get<bool>();
      } else {
        sc.short_factor = rope_.value("short_factor", std::vector<double>{});
        sc.long_factor = rope_.value("long_factor", std::vector<double>{});
      }
    } else if (type == "llama3") {
      sc.type = ScalingType::Llama3;
      sc.factor = required(rope_, "factor", where.c_str());
      sc.low_freq_factor = required(rope_, "low_freq_factor", where.c_str());
      sc.high_freq_factor = required(rope_, "high_freq_factor", where.c_str());
      sc.original_max_position = static_cast<int64_t>(original.value_or(0));
    } else if (type == "proportional") {
      // theta^(-2i/head_dim) on the first partial*head_dim/2 pairs, zero (no
      // rotation) on the rest, half pairing over the whole head.
      const double partial = number_anywhere("partial_rotary_factor").value_or(1.0);
      const int angles = static_cast<int>(partial * s.head_dim / 2);
      s.rotary_dim = s.head_dim;
      s.rotary_offset = 0;
      s.frequency.scheme = FrequencyScheme::Custom;
      s.frequency.values.assign(s.head_dim / 2, 0.0);
      for (int i = 0; i < angles; ++i) s.frequency.values[i] = std::pow(s.frequency.theta, -2.0 * i / s.head_dim);
      out_.notes.push_back(fmt::format("proportional RoPE: {} rotating pairs over the whole head, the rest with "
                                       "frequency 0", angles));
    } else {
      error(fmt::format("rope type `{}` is not supported; rope-gen understands default, linear, dynamic, yarn, "
                        "longrope (su), llama3, proportional", type));
    }
  }

  // M-RoPE (Qwen2-VL, Qwen2.5-VL): mrope_section splits the rotary pairs
  // among the (temporal, height, width) position ids, contiguously; Qwen3-VL's
  // mrope_interleaved deals them out round robin instead.
  void set_axes() {
    auto sections = rope_.find("mrope_section");
    if (sections == rope_.end()) return;
    if (!sections->is_array() ||
        !std::all_of(sections->begin(), sections->end(), [](const json& v) { return v.is_number_integer(); })) {
      error("`mrope_section` must be a list of integers");
      return;
    }
    Axes& axes = out_.spec.axes;
    axes.sections = sections->get<std::vector<int>>();
    auto interleaved = rope_.find("mrope_interleaved");
    axes.interleaved = interleaved != rope_.end() && interleaved->is_boolean() && interleaved->get<bool>();
    out_.spec.positions = PositionsMode::Explicit;
    out_.notes.push_back(fmt::format("M-RoPE: positions are explicit, [..., {}] (one id per axis of mrope_section{})",
                                     axes.count(), axes.interleaved ? ", interleaved" : ""));
  }

  const json& outer_;
  const json& c_;
  std::string file_;
  const HfImportOptions& options_;
  json rope_;
  std::string model_type_;
  HfImport out_;
  std::vector<Diagnostic> errors_;
};

}  // namespace

Result<HfImport> spec_from_hf_config(const json& config, const std::string& file, const HfImportOptions& options) {
  return Importer(config, file, options).run();
}

std::string hf_import_text(const HfImport& import, const std::string& file) {
  std::string out = fmt::format("# rope-gen spec converted from {}\n", file);
  for (const auto& note : import.notes) out += "# " + note + "\n";
  return out + to_yaml(import.spec);
}

}  // namespace ropegen::cli
