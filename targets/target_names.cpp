#include "target_names.h"

#include <fmt/format.h>

namespace ropegen::targets {

Result<Halide::Target> parse_target(const std::string& name) {
  if (name == "host") return Halide::get_host_target();
  if (!Halide::Target::validate_target_string(name))
    return Diagnostic{{"--target", -1, -1},
                      fmt::format("unknown target `{}`; use host or a Halide target such as x86-64-linux-avx2 "
                                  "or arm-64-linux",
                                  name),
                      {}};
  Halide::Target t(name);
  if (t.has_gpu_feature())
    return Diagnostic{{"--target", -1, -1},
                      fmt::format("target `{}` needs a GPU schedule, which this build does not have yet", name), {}};
  return t;
}

}  // namespace ropegen::targets
