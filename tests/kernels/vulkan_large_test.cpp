// A q of 300 MiB on Vulkan, where one kernel argument may span at most
// maxStorageBufferRange (128 MiB on lavapipe): the runtime splits the call
// (runtime/device_call.h); sampled rows are checked against the reference.
// Bounded for CI: few heads, implicit positions, one pass out of place.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "kernels/gpu_parity.h"
#include "lowering/rope_algorithm.h"
#include "ropegen/spec_io.h"
#include "call/parts.h"
#include "kernels/kernel_case.h"
#include "runtime/device_call.h"
#include "runtime/device_probe.h"
#include "runtime/jit_kernel.h"
#include "support/reference.h"

namespace ropegen {
namespace {

// Cheap, deterministic values in [-1, 1): 78M normal samples would take longer than the kernel.
float value_at(int64_t i) { return static_cast<float>((static_cast<uint64_t>(i) * 2654435761u >> 8) & 0xffffff) / 8388608.0f - 1.0f; }

void check_large(const char* layout, int64_t H) {
  SCOPED_TRACE(layout);
  const test::GpuTarget v = test::gpu_target("vulkan");
  if (!v.target) GTEST_SKIP() << "no Vulkan device: " << v.why_not;
  const RopeSpec spec = *parse_spec(std::string("name: big\nhead_dim: 128\nlayout: ") + layout + "\n", "big");
  const int64_t D = 128, S = (int64_t{300} << 20) / (4 * H * D);  // 300 MiB of f32
  const bool bhsd = std::string(layout) == "bhsd";
  const std::vector<int64_t> shape = bhsd ? std::vector<int64_t>{1, H, S, D} : std::vector<int64_t>{1, S, H, D};
  std::vector<float> q(static_cast<size_t>(S * H * D)), out(q.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = value_at(static_cast<int64_t>(i));

  Call call;
  call.q = test::host_tensor(q.data(), ElementType::Float32, shape);
  call.out_q = test::host_tensor(out.data(), ElementType::Float32, shape);
  call.seq_len = S;
  const call::PreparedCall prepared = std::move(call::prepare_call(spec, call)).value();
  const runtime::DeviceInfo device = *runtime::probe_device(*v.target);
  const int parts = runtime::device_parts(spec, {}, runtime::wrap(call::part_views(prepared, {0, S, 0, 1}, nullptr)), device);
  EXPECT_GT(parts, 1) << "a 300 MiB q must be split under a " << device.max_buffer_bytes << "-byte binding limit";

  runtime::JitKernel kernel(spec, {}, *v.target);
  const auto start = std::chrono::steady_clock::now();
  kernel.run(prepared);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ LARGE    ] %s q %lld MiB, %lld heads, in %d parts (binding limit %lld MiB): %.1f s\n", layout,
              static_cast<long long>(q.size() * 4 >> 20), static_cast<long long>(H), parts, static_cast<long long>(device.max_buffer_bytes >> 20),
              seconds);

  // 64 tokens spread over the whole range, part boundaries included.
  int bad = 0;
  for (int i = 0; i < 64 && bad < 5; ++i) {
    const int64_t s = i == 63 ? S - 1 : i * (S / 63) + (i % 7);
    ref::Tensor row{bhsd ? std::vector<int64_t>{1, H, 1, D} : std::vector<int64_t>{1, 1, H, D}, {}};
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) row.data.push_back(q[bhsd ? (h * S + s) * D + d : (s * H + h) * D + d]);
    ref::Call rc;
    rc.offset = s;
    rc.seq_len = S;
    const ref::Tensor want = ref::reference_apply(spec, row, false, rc);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const double got = out[bhsd ? (h * S + s) * D + d : (s * H + h) * D + d], w = want.data[h * D + d];
        if (!(std::abs(got - w) <= 3e-6 + 1e-6 * std::abs(w)) && bad++ < 5)
          ADD_FAILURE() << "token " << s << " head " << h << " dim " << d << ": " << got << ", reference " << w;
      }
  }
}

// 16 heads: parts of 128 MiB (the binding limit decides).
TEST(VulkanLarge, BshdQOf300MiB) { check_large("bshd", 16); }
// 2 heads, 307200 tokens: parts of 32768 tokens (the workgroup count
// limit, 65535 on lavapipe, decides), gathered from heads S * D apart.
TEST(VulkanLarge, BhsdQOf300MiB) { check_large("bhsd", 2); }

}  // namespace
}  // namespace ropegen
