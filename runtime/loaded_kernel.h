// A kernel loaded from a disk-cache entry with dlopen. Its entry points are
// called through Halide's <fn>_argv variant, with the arguments that
// <fn>_metadata lists in call order (call/argv_entry.h) — the same binding
// the JIT kernel and AOT libraries use. run() is reentrant: each call
// builds its own argument array. A Vulkan kernel runs host calls staged
// through device buffers of its own Halide runtime (device_call.h), and
// device calls on a JIT kernel of its spec (their DeviceMemory is the JIT
// runtime's), compiled at the first one.
#pragma once

#include <memory>
#include <string>

#include "lowering/rope_algorithm.h"
#include "ropegen/result.h"
#include "ropegen/spec.h"
#include "runtime/kernel.h"
#include "runtime/shared_object.h"

namespace ropegen::runtime {

// `fd` is an open entry that check_entry accepted, from trusted_path; it is
// loaded through /proc/self/fd (a duplicate of it, kept open), so the file
// loaded is the file checked (`path` only names it in messages). The
// object stays loaded until the
// process exits: its Halide runtime owns a thread pool, and dlopen hands
// the same mapping to any later load of the file. A diagnostic means the
// object is not a kernel of this spec and variant.
Result<std::shared_ptr<CompiledKernel>> load_kernel(int fd, const std::string& path, const RopeSpec& spec,
                                                    const lowering::KernelVariant& variant,
                                                    const Halide::Target& target, const KernelSymbols& symbols);

}  // namespace ropegen::runtime
