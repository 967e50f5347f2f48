// rope-gen from-hf CONFIG.json [--name N] [--layer-type T]: a spec from a
// Hugging Face model config, on stdout.
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli_error.h"
#include "commands.h"
#include "hf_config.h"

namespace ropegen::cli {

void add_from_hf_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("from-hf", "Write a spec (to stdout) from a Hugging Face config.json: rope_theta, "
                                            "rope_scaling / rope_parameters,\npartial_rotary_factor, head_dim, "
                                            "max positions; pairing from model_type");
  auto path = std::make_shared<std::string>();
  auto options = std::make_shared<HfImportOptions>();
  cmd->add_option("CONFIG", *path, "config.json of the model")->required();
  cmd->add_option("--name", options->name, "spec name (default: model_type)");
  cmd->add_option("--layer-type", options->layer_type,
                  "which per-layer rope parameters to use (e.g. full_attention)");
  cmd->callback([path, options] {
    std::ifstream in(*path);
    if (!in) fail(fmt::format("cannot read {} (does it exist?)", *path));
    nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded()) fail(fmt::format("{} is not valid JSON", *path));
    const HfImport import = unwrap(spec_from_hf_config(config, *path, *options));
    std::cout << hf_import_text(import, *path);
  });
}

}  // namespace ropegen::cli
