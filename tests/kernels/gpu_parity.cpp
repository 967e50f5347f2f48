#include "kernels/gpu_parity.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "ropegen/diagnostics.h"
#include "runtime/device_probe.h"
#include "support/sweep_subset.h"

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

// The summed gradients (float32, whatever the spec's dtype).
void compare_floats(const Halide::Buffer<float>& h, const Halide::Buffer<float>& g, const Case& c, Parity& p) {
  if (!h.defined() || !g.defined()) return;
  for (int i = 0; i < h.width(); ++i) {
    const int64_t ulp = ulp_distance(h(i), g(i));
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

bool device_binds(const Case& c, const Halide::Target& gpu) {
  int64_t alignment = 16;  // CUDA: q, k and the rotary views move in 16-byte vectors
  if (gpu.has_feature(Halide::Target::Vulkan)) alignment = runtime::probe_device(gpu)->offset_alignment;
  const int64_t bytes = c.dtype == "f32" ? 4 : 2;
  const bool binds = c.rotary_offset * bytes % alignment == 0;
  // Vulkan binds every view: out of place, the pass-through dims after the rotary ones too.
  const bool tail = !c.in_place && c.rotary_offset + c.rotary_dim < c.head_dim;
  return binds && !(gpu.has_feature(Halide::Target::Vulkan) && tail &&
                    (c.rotary_offset + c.rotary_dim) * bytes % alignment != 0);
}

Parity run_parity(const std::string& what, const std::vector<Case>& cases, const Halide::Target& gpu, Memory memory) {
  Parity p;
  for (const Case& c : sweep_subset(cases)) {
    if (memory == Memory::Device && !device_binds(c, gpu)) {
      p.unbound++;
      continue;
    }
    auto t0 = Clock::now();
    const CaseOutputs host = run_case(c, Halide::get_host_target());
    auto t1 = Clock::now();
    const CaseOutputs device = run_case(c, gpu, memory);
    p.host_seconds += std::chrono::duration<double>(t1 - t0).count();
    p.gpu_seconds += since(t1);
    p.cases++;
    compare(host, device, host.q, device.q, c, p);
    compare(host, device, host.k, device.k, c, p);
    compare_floats(host.d_q_norm_weight, device.d_q_norm_weight, c, p);
    compare_floats(host.d_k_norm_weight, device.d_k_norm_weight, c, p);
    compare_floats(host.out_scales, device.out_scales, c, p);
  }
  const std::string unbound =
      memory == Memory::Device ? fmt::format(" (device memory; {} cases not run: views the device cannot bind)", p.unbound)
                               : "";
  std::printf("[ PARITY   ] %s: %d cases%s, %lld elements, host vs %s: %lld differ, max %lld ulp%s%s; "
              "%.1f s on the GPU target, %.1f s on the host\n",
              what.c_str(), p.cases, unbound.c_str(), static_cast<long long>(p.elements),
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

void expect_parity(const char* what, const std::vector<Case>& cases, const Halide::Target& gpu, Memory memory) {
  const Parity p = run_parity(what, cases, gpu, memory);
  EXPECT_EQ(p.max_ulp, 0) << p.differing << " elements differ from the host's kernel, worst in " << p.worst_case;
}

}  // namespace ropegen::test
