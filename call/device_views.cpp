#include "call/device_views.h"

#include <fmt/format.h>

namespace ropegen::call {

std::optional<std::string> cuda_misalignment(const BoundPart& part, const ropegen_contract& contract) {
  if (!is_rope(contract)) return std::nullopt;  // the other encodings' kernels are scalar
  using abi::Arg;
  const std::pair<const RawBuffer*, const char*> vectors[] = {{&part.rope[Arg::Q], "q"},
                                                              {&part.rope[Arg::K], "k"},
                                                              {&part.rope[Arg::OutQ], "out_q (its rotary dims)"},
                                                              {&part.rope[Arg::OutK], "out_k (its rotary dims)"}};
  for (auto [view, name] : vectors)
    if (view->defined() && view->address() % 16 != 0)
      return fmt::format("{} starts at {:#x}: CUDA kernels move q, k and the rotary dims of out_q and out_k in "
                         "16-byte vectors, so each must start at a 16-byte aligned address",
                         name, view->address());
  return std::nullopt;
}

}  // namespace ropegen::call
