// rope-gen from-hf CONFIG [--name N] [--layer-type T] [--pairing P]: a spec
// from a Hugging Face config.json (or a directory holding one), on stdout.
#include <iostream>

#include <fmt/format.h>

#include "cli_error.h"
#include "commands.h"
#include "hf_config.h"
#include "hf_json.h"

namespace ropegen::cli {

void add_from_hf_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("from-hf", "Write a spec (to stdout) from a Hugging Face config.json: rope_theta, "
                                            "rope_scaling / rope_parameters,\npartial_rotary_factor, head_dim, "
                                            "max positions, dtype; pairing and defaults from transformers' own code");
  auto path = std::make_shared<std::string>();
  auto options = std::make_shared<HfImportOptions>();
  cmd->add_option("CONFIG", *path, "config.json of the model, or the directory holding it (a hub snapshot)")
      ->required();
  cmd->add_option("--name", options->name, "spec name (default: model_type)");
  cmd->add_option("--layer-type", options->layer_type,
                  "the layer type whose RoPE to write, for models whose layer types differ (e.g. sliding_attention)");
  auto pairing = std::make_shared<std::string>();
  cmd->add_option("--pairing", *pairing,
                  "how the model's apply function pairs dims, for a model_type rope-gen's table does not know or "
                  "cannot read:\nhalf (rotate_half: (i, i + d/2)) or interleaved ((2i, 2i+1))")
      ->check(CLI::IsMember({"half", "interleaved"}))
      ->option_text("half|interleaved");
  cmd->callback([path, options, pairing] {
    if (!pairing->empty()) options->pairing = *pairing == "half" ? Pairing::Half : Pairing::Interleaved;
    const HfConfigFile file = unwrap(read_hf_config(*path));
    const HfImport import = unwrap(spec_from_hf_config(file.config, file.path, *options));
    std::cout << hf_import_text(import, file.path);
  });
}

}  // namespace ropegen::cli
