// GPU kernels checked twice: against the float64 reference (as every
// backend, kernel_case.h) and against the host's kernel, bit for bit. The
// algorithm is one for all targets (lowering/trig.cpp), so any ulp of
// difference is a backend or schedule bug.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <Halide.h>

#include "kernels/kernel_case.h"

namespace ropegen::test {

// The target named `name` (cuda, vulkan) if it runs here; otherwise why not
// (the test skips with that message).
struct GpuTarget {
  std::optional<Halide::Target> target;
  std::string why_not;
};
GpuTarget gpu_target(const std::string& name);

struct Parity {
  int cases = 0;
  int unbound = 0;  // device memory: cases not run (device_binds)
  int64_t elements = 0, differing = 0;
  int64_t max_ulp = 0;
  std::string worst_case;  // the case with max_ulp
  double host_seconds = 0, gpu_seconds = 0;
};

// Runs every case on the host and on `gpu`, its tensors in `memory`;
// prints one summary line. Device memory: a case whose views the device
// cannot bind (a rope output's first rotary dim, or an out-of-place
// partial rotary's pass-through dims, off the device's alignment:
// device_binds) is not run but counted in the line (tests check the
// refusal itself).
Parity run_parity(const std::string& what, const std::vector<Case>& cases, const Halide::Target& gpu,
                  Memory memory = Memory::Host);

// run_parity, expecting the same bits everywhere (a gtest failure otherwise).
void expect_parity(const char* what, const std::vector<Case>& cases, const Halide::Target& gpu,
                   Memory memory = Memory::Host);

// Whether every view of `c`'s call starts where `gpu`'s device binds kernel
// arguments (a multiple of 16 bytes on CUDA, of minStorageBufferOffsetAlignment
// on Vulkan, past the tensors' own aligned starts).
bool device_binds(const Case& c, const Halide::Target& gpu);

// In a test body: the target `name` as `t`, or skip the test saying why not.
#define ROPEGEN_REQUIRE_GPU(t, name)                                          \
  const ::ropegen::test::GpuTarget t = ::ropegen::test::gpu_target(name);     \
  if (!t.target) GTEST_SKIP() << "no " << name << " device: " << t.why_not

// Units in the last place between two float32 results (0: the same bits).
int64_t ulp_distance(float a, float b);

}  // namespace ropegen::test
