// The CLI edge: user errors become one exception type, caught in main().
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "ropegen/result.h"

namespace ropegen::cli {

// A user mistake: printed as is (already formatted), exit code 2.
class CliError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The value of a Result, or a CliError carrying all of its diagnostics.
template <typename T>
T unwrap(Result<T> r) {
  if (!r) throw CliError(format(r.errors()));
  return std::move(r).value();
}

[[noreturn]] void fail(const std::string& message);

}  // namespace ropegen::cli
