// Every number flag of the CLI, checked where CLI11 does not: CLI11 reads
// integers with strtoll, which saturates (a value past int64 would become
// INT64_MAX unnoticed), and its ranges let NaN through (every comparison
// with NaN is false).
#pragma once

#include <CLI/CLI.hpp>

namespace ropegen::cli {

// Adds the checks to every integer and floating-point option of `app` and
// its subcommands: integers within int64, floating-point values finite.
void check_number_flags(CLI::App& app);

}  // namespace ropegen::cli
