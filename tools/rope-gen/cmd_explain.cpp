// rope-gen explain SPEC [--seq-len N] [--max-pos N] [--json] [--plot FILE [--kind K]]:
// what the spec does per rotary pair and how precise engines' cos/sin are
// (ropegen/rope_explain.h); --plot draws it with `python3 -m ropegen.plot`.
#include <cerrno>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cli_error.h"
#include "commands.h"
#include "explain_text.h"
#include "output_files.h"
#include "ropegen/rope_explain.h"
#include "ropegen/spec_io.h"
#include "runtime/kernel_table.h"

extern char** environ;

namespace ropegen::cli {
namespace {

struct ExplainCliOptions {
  std::string spec, plot, kind = "wavelengths";
  std::optional<int64_t> seq_len, max_pos;
  bool json = false;
};

// The exit status of argv[0] (found on PATH) run with the CLI's stdout and
// stderr (or none with quiet); -1 if it could not be started.
int run_program(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  std::cout.flush();
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Before any work: is there a python3 that can draw?
void check_plotting() {
  if (run_program({"python3", "-c", "import ropegen.plot, matplotlib"}, true) != 0)
    fail("--plot needs python3 with the ropegen package and matplotlib: pip install 'ropegen[plot]' "
         "(in a checkout: make python, then pip install matplotlib into the same environment)");
}

void run_plot(const ExplainCliOptions& o) {
  std::vector<std::string> args = {"python3", "-m", "ropegen.plot", o.spec, "-o", o.plot, "--kind", o.kind};
  if (o.max_pos) args.insert(args.end(), {"--max-pos", std::to_string(*o.max_pos)});
  if (o.seq_len) args.insert(args.end(), {"--seq-len", std::to_string(*o.seq_len)});
  if (const int code = run_program(args, false); code != 0)
    fail(fmt::format("--plot: python3 -m ropegen.plot failed (exit status {})", code));
}

void run_explain(const ExplainCliOptions& o) {
  const RopeSpec spec = unwrap(load_spec(o.spec));
  check_outputs({{"--plot", o.plot}});
  if (!o.plot.empty()) check_plotting();
  ExplainOptions options;
  options.seq_len = o.seq_len;
  options.max_pos = o.max_pos;
  options.kernel_table = [&spec](const std::vector<int64_t>& positions, int64_t seq_len) {
    return runtime::kernel_table(Runtime::process(), spec, positions, seq_len);
  };
  const Explanation e = unwrap(explain(spec, options));
  std::cout << (o.json ? explanation_json(e) + "\n" : explanation_text(e));
  if (!o.plot.empty()) run_plot(o);
}

}  // namespace

void add_explain_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("explain",
                                 "Show what SPEC does per rotary pair (frequency before and after scaling, wavelength, "
                                 "scaling regime, axis), its attention factor, and the error of float32-angle, bf16 and "
                                 "f16 tables and rope-gen's kernel against float64 up to --max-pos");
  auto o = std::make_shared<ExplainCliOptions>();
  cmd->add_option("SPEC", o->spec, "spec file (YAML)")->required();
  cmd->add_option("--seq-len", o->seq_len, "run-time sequence length for dynamic and longrope (default: HF's init-time frequencies)");
  cmd->add_option("--max-pos", o->max_pos,
                  "largest position of the precision check (default: original context x factor, at least 131072)");
  cmd->add_flag("--json", o->json, "one JSON object (docs/explain.md lists the keys)");
  auto* plot = cmd->add_option("--plot", o->plot, "also draw a figure (.png or .svg) with python3 -m ropegen.plot");
  cmd->add_option("--kind", o->kind, "what --plot draws")
      ->check(CLI::IsMember({"wavelengths", "decay", "precision", "heatmap", "axes"}))
      ->needs(plot);
  cmd->callback([o] { run_explain(*o); });
}

}  // namespace ropegen::cli
