#include "jit_runtime.h"

namespace ropegen::runtime {

void* jit_runtime_export(const Halide::Target& target, const char* name) {
  for (const Halide::Internal::JITModule& m : Halide::Internal::JITSharedRuntime::get(nullptr, target, false)) {
    const auto& exports = m.exports();
    if (auto it = exports.find(name); it != exports.end() && it->second.address) return it->second.address;
  }
  return nullptr;
}

}  // namespace ropegen::runtime
