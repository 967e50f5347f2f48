// rope-gen: parsing and dispatch. User errors (CliError, running out of
// memory, Halide refusing a target or failing a run) exit with 2 and a
// message; anything else escaping is a bug in rope-gen and says so.
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#include <CLI/CLI.hpp>
#include <Halide.h>

#include "cli_error.h"
#include "commands.h"
#include "number_flags.h"
#include "runtime/halide_messages.h"

int main(int argc, char** argv) {
  // The CLI owns its process: Halide's compile-time warnings only with ROPEGEN_VERBOSE=1.
  ropegen::runtime::install_halide_message_filter();
  CLI::App app{"rope-gen: a kernel compiler for rotary (and other) positional encodings.\n"
               "A YAML spec in, exact kernels out. See docs/spec.md for the spec reference."};
  app.name("rope-gen");
  app.require_subcommand(1);
  ropegen::cli::add_check_command(app);
  ropegen::cli::add_freqs_command(app);
  ropegen::cli::add_explain_command(app);
  ropegen::cli::add_from_hf_command(app);
  ropegen::cli::add_apply_command(app);
  ropegen::cli::add_bench_command(app);
  ropegen::cli::add_table_command(app);
  ropegen::cli::add_build_command(app);
  ropegen::cli::add_cache_command(app);
  ropegen::cli::check_number_flags(app);
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
  } catch (const std::bad_alloc&) {
    // Sizes users ask for are checked first (runtime/host_memory.h); this is what is left.
    std::fputs("error: out of memory: the tensors or sizes given need more memory than this machine has\n", stderr);
    return 2;
  } catch (const Halide::CompileError& e) {
    std::fprintf(stderr, "error: Halide cannot compile this spec for the target: %s\n", e.what());
    return 2;
  } catch (const Halide::RuntimeError& e) {
    std::fprintf(stderr, "error: running the kernel failed: %s\n", e.what());
    return 2;
  } catch (const Halide::InternalError& e) {
    std::fprintf(stderr, "rope-gen: internal error in Halide: %s\nplease report this with the spec that caused it\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rope-gen: internal error: %s\nplease report this with the spec that caused it\n", e.what());
    return 3;
  }
  return 0;
}
