#include "number_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace ropegen::cli {
namespace {

// The same base rules as CLI11's own conversion (strtoll, base 0).
std::string within_int64(std::string& text) {
  errno = 0;
  char* end = nullptr;
  std::strtoll(text.c_str(), &end, 0);
  return errno == ERANGE ? text + " is beyond the 64-bit integers (-2^63..2^63-1)" : std::string();
}

std::string finite(std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && !std::isfinite(v) ? text + " is not a finite number" : std::string();
}

}  // namespace

void check_number_flags(CLI::App& app) {
  static const CLI::Validator kInt64(within_int64, "");
  static const CLI::Validator kFinite(finite, "");
  for (CLI::Option* option : app.get_options()) {
    // CLI11 names an option's value type INT or FLOAT (then ':' and its checks).
    const std::string type = option->get_type_name();
    if (type.rfind("INT", 0) == 0) option->check(kInt64);
    if (type.rfind("FLOAT", 0) == 0) option->check(kFinite);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_number_flags(*sub);
}

}  // namespace ropegen::cli
