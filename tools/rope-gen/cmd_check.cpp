// rope-gen check SPEC: validate and print the normalised spec.
#include <iostream>

#include "cli_error.h"
#include "commands.h"
#include "ropegen/spec_io.h"

namespace ropegen::cli {

void add_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Validate SPEC and print it normalised (every default filled in)");
  auto path = std::make_shared<std::string>();
  cmd->add_option("SPEC", *path, "spec file (YAML)")->required();
  cmd->callback([path] {
    const RopeSpec spec = unwrap(load_spec(*path));
    std::cout << "# rope-gen normalised spec, hash " << spec_hash(spec) << "\n" << to_yaml(spec);
  });
}

}  // namespace ropegen::cli
