// rope-gen: parsing and dispatch. User errors (CliError) exit with 2 and a
// message; anything else escaping is a bug in rope-gen and says so.
#include <cstdio>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_error.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"rope-gen: a kernel compiler for rotary (and other) positional encodings.\n"
               "A YAML spec in, exact kernels out. See README.md for the spec reference."};
  app.name("rope-gen");
  app.require_subcommand(1);
  ropegen::cli::add_check_command(app);
  ropegen::cli::add_freqs_command(app);
  ropegen::cli::add_from_hf_command(app);
  ropegen::cli::add_apply_command(app);
  ropegen::cli::add_bench_command(app);
  ropegen::cli::add_table_command(app);
  ropegen::cli::add_build_command(app);
  ropegen::cli::add_cache_command(app);
  std::vector<char*> args(argv, argv + argc);
  static char build[] = "build";
  if (ropegen::cli::is_bare_spec_call(app, argc, argv)) args.insert(args.begin() + 1, build);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // usage errors are user errors
  } catch (const ropegen::cli::CliError& e) {
    std::fputs(e.what(), stderr);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rope-gen: internal error: %s\nplease report this with the spec that caused it\n", e.what());
    return 3;
  }
  return 0;
}
