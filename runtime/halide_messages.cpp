#include "halide_messages.h"

#include <cstdio>
#include <cstdlib>

#include <Halide.h>

namespace ropegen::runtime {
namespace {

class QuietWarnings : public Halide::CompileTimeErrorReporter {
 public:
  void warning(const char* msg) override {
    if (std::getenv("ROPEGEN_VERBOSE")) std::fprintf(stderr, "halide: %s", msg);
  }
  [[noreturn]] void error(const char* msg) override { throw Halide::CompileError(msg); }
};

}  // namespace

void quiet_runtime_print(Halide::JITUserContext*, const char* message) {
  if (std::getenv("ROPEGEN_VERBOSE")) std::fprintf(stderr, "halide: %s", message);
}

void quiet_runtime_prints(Halide::Pipeline& pipeline) { pipeline.jit_handlers().custom_print = quiet_runtime_print; }

void install_halide_message_filter() {
  static QuietWarnings reporter;  // must outlive every Halide call
  static const bool installed = (Halide::set_custom_compile_time_error_reporter(&reporter), true);
  (void)installed;
}

}  // namespace ropegen::runtime
