#include "support/run_command.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>

namespace ropegen::test {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string make_temp_dir() {
  std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : "/tmp") + "/ropegen-test-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

namespace {

// AddressSanitizer says this once per process when libHalide runs LLVM on a
// larger stack (swapcontext); in the sanitizer build it is noise, not output.
std::string without_asan_swapcontext_notice(std::string err) {
  const std::string notice = "WARNING: ASan doesn't fully support makecontext/swapcontext";
  const size_t at = err.find(notice);
  if (at == std::string::npos) return err;
  const size_t begin = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
  const size_t end = err.find('\n', at);
  return err.erase(begin, end == std::string::npos ? std::string::npos : end - begin + 1);
}

}  // namespace

CommandResult run_command(const std::string& command_line) {
  const std::string dir = make_temp_dir();
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const int status = std::system((command_line + " >" + out + " 2>" + err).c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out);
  r.err = without_asan_swapcontext_notice(read_text(err));
  std::system(("rm -rf " + dir).c_str());
  return r;
}

}  // namespace ropegen::test
