// Each subcommand registers itself on the app and runs when selected.
#pragma once

#include <CLI/CLI.hpp>

namespace ropegen::cli {

void add_check_command(CLI::App& app);
void add_freqs_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_from_hf_command(CLI::App& app);
void add_apply_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_table_command(CLI::App& app);
void add_build_command(CLI::App& app);
void add_cache_command(CLI::App& app);

// `rope-gen SPEC` (a .yaml/.yml or existing file, not a subcommand) means `rope-gen build SPEC`.
bool is_bare_spec_call(const CLI::App& app, int argc, char** argv);

}  // namespace ropegen::cli
