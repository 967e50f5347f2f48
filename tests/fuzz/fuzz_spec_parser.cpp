// libFuzzer target: any bytes through the spec parser must give a spec or
// diagnostics, never a crash, hang or uncaught exception. A spec that parses
// must normalise to a fixed point.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ropegen/spec_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ropegen::Result<ropegen::RopeSpec> spec = ropegen::parse_spec(text, "fuzz.yaml");
  if (!spec.ok()) {
    (void)ropegen::format(spec.errors());
    return 0;
  }
  const std::string once = ropegen::to_yaml(*spec);
  ropegen::Result<ropegen::RopeSpec> again = ropegen::parse_spec(once, "normalised.yaml");
  if (!again.ok() || ropegen::to_yaml(*again) != once) std::abort();
  return 0;
}
