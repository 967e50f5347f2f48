// rope-gen from-hf CONFIG [--name N] [--layer-type T | --all-layer-types -o DIR]
// [--pairing P] [--vision]: a spec from a Hugging Face config.json (or a
// directory holding one), on stdout, or one spec file per layer type.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "atomic_file.h"
#include "cli_error.h"
#include "commands.h"
#include "hf_config.h"
#include "hf_json.h"
#include "output_files.h"

namespace ropegen::cli {
namespace {

// The converter is the library's (hf/, include/ropegen/from_hf.h): this file only parses flags and writes.
using hf::HfConfigFile;
using hf::HfImport;
using hf::HfImportOptions;

// --all-layer-types -o DIR: DIR/<name>_<layer type>.yaml for every layer type
// with RoPE, all checked before any is written; NoPE layers are reported.
void write_layer_type_specs(const HfConfigFile& file, const HfImportOptions& options, const std::string& dir) {
  const std::vector<std::string> types = unwrap(hf::hf_layer_types(file.config, file.path, options));
  if (types.empty() || types == std::vector<std::string>{"nope"})
    fail("--all-layer-types: this config names no layer types (every layer with RoPE has the same); leave the flag "
         "out");
  std::vector<std::string> with_rope;
  std::vector<HfImport> imports;
  std::vector<OutputFile> outputs;
  for (const std::string& type : types) {
    if (type == "nope") continue;
    with_rope.push_back(type);
    HfImportOptions one = options;
    one.layer_type = type;
    // The layer type is text from the config: made a name part as model_type is (--name itself is never rewritten).
    one.name = hf::derived_name(unwrap(hf::spec_from_hf_config(file.config, file.path, one)).spec.name + "_" + type);
    imports.push_back(unwrap(hf::spec_from_hf_config(file.config, file.path, one)));
    outputs.push_back({fmt::format("-o (layer type {})", type), dir + "/" + imports.back().spec.name + ".yaml"});
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) && !std::filesystem::create_directory(dir, ec))
    fail(fmt::format("-o {}: not a directory{}", dir, ec ? " and cannot be created: " + ec.message() : ""));
  check_outputs(outputs);
  for (size_t i = 0; i < imports.size(); ++i) {
    write_file_atomically(outputs[i].path, hf::hf_import_text(imports[i], file.path));
    std::cout << fmt::format("layer type {}: {}\n", with_rope[i], outputs[i].path);
  }
  if (types.back() == "nope")
    std::cout << "layer type nope: its layers apply no RoPE (NoPE); no spec written\n";
}

}  // namespace

void add_from_hf_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("from-hf", "Write a spec (to stdout) from a Hugging Face config.json: rope_theta, "
                                            "rope_scaling / rope_parameters,\npartial_rotary_factor, head_dim, "
                                            "max positions, dtype; pairing and defaults from transformers' own code");
  auto path = std::make_shared<std::string>();
  auto options = std::make_shared<HfImportOptions>();
  cmd->add_option("CONFIG", *path, "config.json of the model, or the directory holding it (a hub snapshot)")
      ->required();
  cmd->add_option("--name", options->name,
                  "spec name, [a-z_][a-z0-9_]* and at most 64 characters (default: model_type, made such a name)");
  auto* layer_type = cmd->add_option("--layer-type", options->layer_type,
                  "the layer type whose RoPE to write, for models whose layer types differ (e.g. sliding_attention)");
  auto pairing = std::make_shared<std::string>();
  auto* pairing_flag = cmd->add_option("--pairing", *pairing,
                  "how the model's apply function pairs dims, for a model_type rope-gen's table does not know or "
                  "cannot read:\nhalf (rotate_half: (i, i + d/2)) or interleaved ((2i, 2i+1))")
      ->check(CLI::IsMember({"half", "interleaved"}))
      ->option_text("half|interleaved");
  cmd->add_flag("--vision", options->vision,
                "the vision tower's 2D RoPE (vision_config) instead of the text model's: Qwen2-VL, Qwen2.5-VL, "
                "Qwen3-VL, Pixtral / Mistral 3, Llama 4")
      ->excludes(layer_type)
      ->excludes(pairing_flag);
  auto dir = std::make_shared<std::string>();
  auto* all = cmd->add_flag("--all-layer-types", "one spec per layer type with RoPE, written to -o DIR as "
                                                 "<name>_<layer type>.yaml (NoPE layers are reported, no spec)")
                  ->excludes(layer_type);
  auto* out_dir = cmd->add_option("-o,--out-dir", *dir, "the directory --all-layer-types writes to (created if missing)");
  all->needs(out_dir)->excludes("--vision");
  out_dir->needs(all);
  cmd->callback([path, options, pairing, dir, all] {
    if (!pairing->empty()) options->pairing = *pairing == "half" ? Pairing::Half : Pairing::Interleaved;
    const HfConfigFile file = unwrap(hf::read_hf_config(*path));
    if (all->count() > 0) return write_layer_type_specs(file, *options, *dir);
    std::cout << hf::hf_import_text(unwrap(hf::import_hf(file.config, file.path, *options)), file.path);
  });
}

}  // namespace ropegen::cli
