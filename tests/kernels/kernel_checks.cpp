#include "kernels/kernel_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "kernels/device_mirror.h"
#include "kernels/kernel_case.h"
#include "runtime/host_tensor.h"
#include "ropegen/runtime.h"
#include "ropegen/spec_io.h"
#include "support/reference.h"

namespace ropegen::test {

// The kernel as built, at long context: every pair holds (1, 0), so the
// outputs are cos and sin of pos * inv_freq, compared with long double.
double max_trig_error(double theta, int64_t max_position, const Halide::Target& target, std::vector<float>* outputs,
                      TrigPositions positions) {
  const bool implicit = positions == TrigPositions::Implicit;
  const RopeSpec spec = *parse_spec(fmt::format("name: acc\nhead_dim: 128\npositions: {}\nlayout: thd\n"
                                                "frequency: {{theta: {}}}\n", implicit ? "implicit" : "explicit", theta), "acc");
  const int64_t tokens = 4096;
  std::vector<int64_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    ids[t] = implicit ? max_position - (tokens - 1) + t : max_position - t * 997 % max_position;  // spread over the range
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  const std::vector<int32_t> cu_seqlens = {0, static_cast<int32_t>(tokens)};
  std::vector<float> q(tokens * 128, 0.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < 64; ++i) q[t * 128 + i] = 1.0f;  // half pairing: (x_i, x_{i+64}) = (1, 0)
  runtime::HostStorage in = runtime::to_storage(q, DType::F32), out = in.empty_like();
  KernelVariant variant;
  variant.position_type =
      positions == TrigPositions::Int64Ids ? IdType::Int64 : IdType::Int32;  // implicit: the call's default
  Call call;
  const std::vector<int64_t> shape = {tokens, 1, 128};
  call.q = host_tensor(in.data(), in.element_type(), shape);
  call.out_q = host_tensor(out.data(), in.element_type(), shape);
  if (implicit) {
    call.offset = ids[0];
    call.cu_seqlens = host_tensor(cu_seqlens.data(), ElementType::Int32, {2});
  } else if (positions == TrigPositions::Int32Ids) {
    call.positions = host_tensor(ids32.data(), ElementType::Int32, {tokens});
  } else {
    call.positions = host_tensor(ids.data(), ElementType::Int64, {tokens});
  }
  call.seq_len = max_position + 1;
  run_kernel(spec, variant, target, call);
  const std::vector<float> got = out.to_float();
  if (outputs) *outputs = got;
  double worst = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < 64; ++i) {
      const long double angle = static_cast<long double>(ids[t]) * powl(static_cast<long double>(theta), -2.0L * i / 128);
      worst = std::max(worst, static_cast<double>(std::fabs(got[t * 128 + i] - cosl(angle))));
      worst = std::max(worst, static_cast<double>(std::fabs(got[t * 128 + 64 + i] - sinl(angle))));
    }
  return worst;
}

double max_sinusoidal_error(int64_t max_position, const Halide::Target& target, TrigPositions positions) {
  const bool implicit = positions == TrigPositions::Implicit;
  const RopeSpec spec = *parse_spec(fmt::format("name: acc\nencoding: sinusoidal\ndim: 128\ntable_form: interleaved\n"
                                                "positions: {}\n", implicit ? "implicit" : "explicit"), "acc");
  const int64_t tokens = 4096;
  std::vector<int64_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    ids[t] = implicit ? max_position - (tokens - 1) + t : max_position - t * 997 % max_position;
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  runtime::HostStorage in = runtime::to_storage(std::vector<float>(tokens * 128, 0.0f), DType::F32), out = in.empty_like();
  KernelVariant variant;
  variant.position_type =
      positions == TrigPositions::Int64Ids ? IdType::Int64 : IdType::Int32;  // implicit: the call's default
  Call call;
  const std::vector<int64_t> shape = {1, tokens, 128};
  call.q = host_tensor(in.data(), in.element_type(), shape);
  call.out_q = host_tensor(out.data(), in.element_type(), shape);
  if (implicit) call.offset = ids[0];
  else if (positions == TrigPositions::Int32Ids) call.positions = host_tensor(ids32.data(), ElementType::Int32, {1, tokens});
  else call.positions = host_tensor(ids.data(), ElementType::Int64, {1, tokens});
  run_kernel(spec, variant, target, call);
  const std::vector<float> got = out.to_float();
  double worst = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < 64; ++i) {
      const long double angle = static_cast<long double>(ids[t]) * powl(10000.0L, -2.0L * i / 128);
      worst = std::max(worst, static_cast<double>(std::fabs(got[t * 128 + 2 * i] - sinl(angle))));
      worst = std::max(worst, static_cast<double>(std::fabs(got[t * 128 + 2 * i + 1] - cosl(angle))));
    }
  return worst;
}

// q and k sliced from one fused qkv projection [.., Hq + 2 Hk, D] (bshd,
// sbhd) are rotated where they lie, without a copy; v and everything else
// (canaries) is untouched, in place and out of place.
void check_fused_qkv(const char* layout, bool in_place, const Halide::Target& target, Memory memory) {
  SCOPED_TRACE(std::string(layout) + (in_place ? " in place" : " out of place") +
               (memory == Memory::Device ? " in device memory" : ""));
  // The rotary dims start 16 bytes into a head, where devices bind them.
  const RopeSpec spec = *parse_spec(fmt::format("name: f\nhead_dim: 16\nrotary_dim: 12\nrotary_offset: 4\n"
                                                "pairing: interleaved\nlayout: {}\n", layout), "f");
  const int64_t B = 2, S = 5, Hq = 4, Hk = 2, H = Hq + 2 * Hk, D = 16;
  const bool sbhd = std::string(layout) == "sbhd";
  const std::vector<int64_t> fused_shape = sbhd ? std::vector<int64_t>{S, B, H, D} : std::vector<int64_t>{B, S, H, D};
  const std::vector<int64_t> strides = sbhd ? std::vector<int64_t>{B * H * D, H * D, D, 1}
                                            : std::vector<int64_t>{S * H * D, H * D, D, 1};
  std::vector<float> fused(B * S * H * D);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  for (float& v : fused) v = dist(rng);
  const std::vector<float> original = fused;
  const float canary = 12345.0f;
  std::vector<float> out(fused.size(), canary);
  float* dst = in_place ? fused.data() : out.data();

  auto shape_with_heads = [&](int64_t heads) {
    std::vector<int64_t> s = fused_shape;
    s[2] = heads;
    return s;
  };
  Call call;
  call.q = host_tensor(fused.data(), ElementType::Float32, shape_with_heads(Hq), strides);
  call.k = host_tensor(fused.data() + Hq * D, ElementType::Float32, shape_with_heads(Hk), strides);
  call.out_q = host_tensor(dst, ElementType::Float32, shape_with_heads(Hq), strides);
  call.out_k = host_tensor(dst + Hq * D, ElementType::Float32, shape_with_heads(Hk), strides);
  call.seq_len = S;
  KernelVariant variant;
  variant.with_k = true;
  if (memory == Memory::Device) {
    DeviceMirror mirror(target);
    mirror.add(fused.data(), fused.size() * 4);
    if (!in_place) mirror.add(out.data(), out.size() * 4);
    run_kernel(spec, variant, target, mirror.on_device(call));
    mirror.copy_back();
  } else {
    run_kernel(spec, variant, target, call);
  }

  // Reference on dense copies of the slices.
  auto slice = [&](int64_t head0, int64_t heads) {
    ref::Tensor t{shape_with_heads(heads), {}};
    for (int64_t i = 0; i < fused_shape[0]; ++i)
      for (int64_t j = 0; j < fused_shape[1]; ++j)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < D; ++d) t.data.push_back(original[((i * fused_shape[1] + j) * H + head0 + h) * D + d]);
    return t;
  };
  ref::Call rc;
  rc.seq_len = S;
  const ref::Tensor q_ref = ref::reference_apply(spec, slice(0, Hq), false, rc);
  const ref::Tensor k_ref = ref::reference_apply(spec, slice(Hq, Hk), true, rc);
  size_t qi = 0, ki = 0;
  for (int64_t i = 0; i < fused_shape[0]; ++i)
    for (int64_t j = 0; j < fused_shape[1]; ++j)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const size_t at = ((i * fused_shape[1] + j) * H + h) * D + d;
          const float got = dst[at];
          if (h < Hq) EXPECT_NEAR(got, q_ref.data[qi++], 3e-6) << "q at " << at;
          else if (h < Hq + Hk) EXPECT_NEAR(got, k_ref.data[ki++], 3e-6) << "k at " << at;
          else EXPECT_EQ(got, in_place ? original[at] : canary) << "v / canary at " << at;
        }
}

}  // namespace ropegen::test
