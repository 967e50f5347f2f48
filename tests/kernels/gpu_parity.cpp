#include "kernels/gpu_parity.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "ropegen/diagnostics.h"
#include "runtime/device_probe.h"

namespace ropegen::test {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void compare(const CaseOutputs& host, const CaseOutputs& gpu, const Halide::Buffer<>& h, const Halide::Buffer<>& g,
             const Case& c, Parity& p) {
  if (!h.defined() || !g.defined()) return;  // a failure was reported already
  for (int64_t i = 0; i < static_cast<int64_t>(h.number_of_elements()); ++i) {
    const int64_t ulp = ulp_distance(host.dtype, h, g, i);
    p.elements++;
    if (ulp == 0) continue;
    p.differing++;
    if (ulp > p.max_ulp) p.max_ulp = ulp, p.worst_case = c.describe();
  }
}

}  // namespace

GpuTarget gpu_target(const std::string& name) {
  Result<Halide::Target> t = runtime::runnable_target(name);
  if (!t) return {std::nullopt, format(t.errors())};
  return {*t, ""};
}

Parity run_parity(const std::string& what, const std::vector<Case>& cases, const Halide::Target& gpu) {
  Parity p;
  for (const Case& c : cases) {
    auto t0 = Clock::now();
    const CaseOutputs host = run_case(c, Halide::get_host_target());
    auto t1 = Clock::now();
    const CaseOutputs device = run_case(c, gpu);
    p.host_seconds += std::chrono::duration<double>(t1 - t0).count();
    p.gpu_seconds += since(t1);
    p.cases++;
    compare(host, device, host.q, device.q, c, p);
    compare(host, device, host.k, device.k, c, p);
  }
  std::printf("[ PARITY   ] %s: %d cases, %lld elements, host vs %s: %lld differ, max %lld ulp%s%s; "
              "%.1f s on the GPU target, %.1f s on the host\n",
              what.c_str(), p.cases, static_cast<long long>(p.elements),
              gpu.has_feature(Halide::Target::CUDA) ? "CUDA" : "Vulkan",
              static_cast<long long>(p.differing), static_cast<long long>(p.max_ulp),
              p.max_ulp ? " in " : "", p.worst_case.c_str(), p.gpu_seconds, p.host_seconds);
  return p;
}

int64_t ulp_distance(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  const int64_t ox = x < 0 ? int64_t{INT32_MIN} - x : x, oy = y < 0 ? int64_t{INT32_MIN} - y : y;
  return ox > oy ? ox - oy : oy - ox;
}

void expect_parity(const char* what, const std::vector<Case>& cases, const Halide::Target& gpu) {
  const Parity p = run_parity(what, cases, gpu);
  EXPECT_EQ(p.max_ulp, 0) << p.differing << " elements differ from the host's kernel, worst in " << p.worst_case;
}

}  // namespace ropegen::test
