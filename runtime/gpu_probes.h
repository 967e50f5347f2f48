// The per-API halves of device_probe.h: each loads its driver library with
// dlopen (rope-gen never links against a GPU driver) and describes the
// device Halide's runtime will pick, or says what is missing.
#pragma once

#include <string>
#include <variant>

#include "runtime/device_probe.h"

namespace ropegen::runtime {

// A DeviceInfo, or why the API cannot run here (one sentence, no target name).
using ProbeResult = std::variant<DeviceInfo, std::string>;

ProbeResult probe_cuda();
ProbeResult probe_vulkan();

}  // namespace ropegen::runtime
