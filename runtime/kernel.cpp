#include "runtime/kernel.h"

#include <fmt/format.h>

#include "call/prepare_call.h"

namespace ropegen::runtime {

std::string device_mismatch(const call::PreparedCall& call, const std::string& runs_on) {
  return fmt::format("{} is on {}:{} but this kernel runs on {}: a kernel takes host (cpu) tensors, or tensors on the "
                     "device of its GPU target",
                     call::input_name(call.contract), to_string(call.device.type), call.device.id, runs_on);
}

}  // namespace ropegen::runtime
