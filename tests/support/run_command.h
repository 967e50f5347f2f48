// Runs rope-gen (or any command) in a shell and captures its exit code,
// stdout and stderr, for tests that call the CLI exactly as users do.
#pragma once

#include <string>

namespace ropegen::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CommandResult run_command(const std::string& command_line);
// A fresh empty directory under the system temp dir.
std::string make_temp_dir();
std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text);

}  // namespace ropegen::test
