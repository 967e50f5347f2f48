#include "cli_error.h"

namespace ropegen::cli {

void fail(const std::string& message) { throw CliError("error: " + message + "\n"); }

}  // namespace ropegen::cli
