// The CPU kernels (JIT) against the independent float64 reference over a
// sweep of the spec space. Each case prints its parameters, so a failure
// names the exact combination.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "runtime/host_tensor.h"
#include "runtime/jit_kernel.h"
#include "runtime/tensor_view.h"
#include "ropegen/spec_io.h"
#include "support/reference.h"

namespace ropegen {
namespace {

struct Case {
  std::string layout = "bshd", pairing = "half", dtype = "f32", scaling, xpos, output_pairing;
  int head_dim = 16, rotary_dim = 16, rotary_offset = 0;
  int B = 2, S = 5, H = 3, Hk = 0;  // Hk = 0: no k
  bool explicit_positions = false, shared_positions = false, int64_positions = false, in_place = false;
  int64_t offset = 0;
  std::vector<int64_t> cu_seqlens;  // thd

  std::string spec_text() const {
    return fmt::format("name: t\nhead_dim: {}\nrotary_dim: {}\nrotary_offset: {}\npairing: {}\nlayout: {}\n"
                       "dtype: {}\npositions: {}\n{}{}{}",
                       head_dim, rotary_dim, rotary_offset, pairing, layout, dtype,
                       explicit_positions ? "explicit" : "implicit", scaling, xpos,
                       output_pairing.empty() ? "" : "output_pairing: " + output_pairing + "\n");
  }
  std::string describe() const {
    return fmt::format("{} {} {} D={} R={} off={} B={} S={} H={} Hk={} pos={}{}{} offset={} in_place={} | {}{}",
                       layout, pairing, dtype, head_dim, rotary_dim, rotary_offset, B, S, H, Hk,
                       explicit_positions ? "explicit" : "implicit", shared_positions ? "[S]" : "",
                       int64_positions ? " i64" : "", offset, in_place, scaling, xpos);
  }
};

std::vector<int64_t> shape_of(const Case& c, int heads) {
  if (c.layout == "bshd") return {c.B, c.S, heads, c.head_dim};
  if (c.layout == "bhsd") return {c.B, heads, c.S, c.head_dim};
  if (c.layout == "sbhd") return {c.S, c.B, heads, c.head_dim};
  return {c.S, heads, c.head_dim};  // thd: S = T
}

// Values representable in the storage type, so the reference sees exactly the kernel's input.
float round_to(DType t, float v) {
  if (t == DType::F16) return static_cast<float>(Halide::float16_t(v));
  if (t == DType::BF16) return static_cast<float>(Halide::bfloat16_t(v));
  return v;
}

double tolerance(DType t, double ref) {
  const double rel = t == DType::F32 ? 1e-6 : t == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  return 3e-6 + rel * std::abs(ref);
}

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;   // exact (already rounded to the storage type)
  Halide::Buffer<> storage;    // dense, spec dtype, in the layout's own order
};

Tensor make_tensor(const RopeSpec& spec, std::vector<int64_t> shape, std::mt19937& rng) {
  Tensor t;
  t.shape = shape;
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::normal_distribution<float> dist(0.0f, 1.5f);
  const Halide::Type type = lowering::storage_type(spec.dtype);
  std::vector<int> extents(shape.rbegin(), shape.rend());  // Halide order: innermost first
  t.storage = Halide::Buffer<>(type, extents);
  for (int64_t i = 0; i < n; ++i) {
    const float v = round_to(spec.dtype, dist(rng));
    t.values.push_back(v);
    if (spec.dtype == DType::F32) static_cast<float*>(t.storage.data())[i] = v;
    else if (spec.dtype == DType::F16) static_cast<Halide::float16_t*>(t.storage.data())[i] = Halide::float16_t(v);
    else static_cast<Halide::bfloat16_t*>(t.storage.data())[i] = Halide::bfloat16_t(v);
  }
  return t;
}

double element(const Halide::Buffer<>& b, DType t, int64_t i) {
  if (t == DType::F32) return static_cast<const float*>(b.data())[i];
  if (t == DType::F16) return static_cast<double>(static_cast<const Halide::float16_t*>(b.data())[i]);
  return static_cast<double>(static_cast<const Halide::bfloat16_t*>(b.data())[i]);
}

void run_case_or_throw(const Case& c);

void run_case(const Case& c) {
  try {
    run_case_or_throw(c);
  } catch (const Halide::Error& e) {
    ADD_FAILURE() << c.describe() << "\nHalide error: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.describe() << "\nexception: " << e.what();
  }
}

void run_case_or_throw(const Case& c) {
  SCOPED_TRACE(c.describe());
  Result<RopeSpec> parsed = parse_spec(c.spec_text(), "case");
  ASSERT_TRUE(parsed.ok()) << format(parsed.errors());
  const RopeSpec spec = *parsed;
  std::mt19937 rng(1234);

  Tensor q = make_tensor(spec, shape_of(c, c.H), rng);
  std::optional<Tensor> k;
  if (c.Hk) k = make_tensor(spec, shape_of(c, c.Hk), rng);

  ref::Call call;
  call.offset = c.offset;
  call.cu_seqlens = c.cu_seqlens;
  std::vector<int64_t> pos_shape, pos_values;
  if (c.explicit_positions) {
    if (c.layout == "thd" || c.shared_positions) pos_shape = {c.S};
    else if (c.layout == "sbhd") pos_shape = {c.S, c.B};
    else pos_shape = {c.B, c.S};
    int64_t n = 1;
    for (auto d : pos_shape) n *= d;
    std::uniform_int_distribution<int64_t> pd(0, 70000);
    for (int64_t i = 0; i < n; ++i) pos_values.push_back(i % 3 == 0 ? i : pd(rng));
    call.positions = ref::Tensor{pos_shape, std::vector<double>(pos_values.begin(), pos_values.end())};
  }

  // seq_len as HF takes it: max position + 1.
  int64_t seq_len = 0;
  if (c.explicit_positions) {
    for (auto p : pos_values) seq_len = std::max(seq_len, p + 1);
  } else if (c.layout == "thd") {
    for (size_t i = 0; i + 1 < c.cu_seqlens.size(); ++i)
      seq_len = std::max(seq_len, c.offset + c.cu_seqlens[i + 1] - c.cu_seqlens[i]);
  } else {
    seq_len = c.offset + c.S;
  }
  call.seq_len = seq_len;

  lowering::KernelVariant variant;
  variant.with_k = k.has_value();
  variant.position_type = c.int64_positions ? Halide::Int(64) : Halide::Int(32);
  runtime::JitKernel kernel(spec, variant, Halide::get_host_target());

  const Halide::Type type = lowering::storage_type(spec.dtype);
  runtime::RopeCall rc;
  rc.q = runtime::logical_tensor(q.storage.data(), type, spec.layout, q.shape, runtime::dense_strides(q.shape));
  Halide::Buffer<> out_q_storage = c.in_place ? q.storage : Halide::Buffer<>(type, q.storage.number_of_elements());
  rc.out_q = runtime::logical_tensor(out_q_storage.data(), type, spec.layout, q.shape, runtime::dense_strides(q.shape));
  Halide::Buffer<> out_k_storage;
  if (k) {
    rc.k = runtime::logical_tensor(k->storage.data(), type, spec.layout, k->shape, runtime::dense_strides(k->shape));
    out_k_storage = c.in_place ? k->storage : Halide::Buffer<>(type, k->storage.number_of_elements());
    rc.out_k = runtime::logical_tensor(out_k_storage.data(), type, spec.layout, k->shape, runtime::dense_strides(k->shape));
  }
  std::vector<int32_t> pos32(pos_values.begin(), pos_values.end());
  std::vector<int64_t> pos64 = pos_values;
  if (c.explicit_positions)
    rc.positions = runtime::logical_positions(c.int64_positions ? static_cast<void*>(pos64.data()) : pos32.data(),
                                              variant.position_type, spec.layout, pos_shape, c.B);
  std::vector<int32_t> cu(c.cu_seqlens.begin(), c.cu_seqlens.end());
  if (!cu.empty()) rc.cu_seqlens = Halide::Buffer<int32_t>(cu.data(), static_cast<int>(cu.size()));
  rc.offset = c.offset;
  rc.seq_len = seq_len;
  kernel.run(rc);

  auto check = [&](const Tensor& in, const Halide::Buffer<>& out, bool is_key, const char* what) {
    const ref::Tensor want = ref::reference_apply(spec, {in.shape, std::vector<double>(in.values.begin(), in.values.end())},
                                                  is_key, call);
    int bad = 0;
    for (size_t i = 0; i < want.data.size() && bad < 5; ++i) {
      const double got = element(out, spec.dtype, static_cast<int64_t>(i));
      if (!(std::abs(got - want.data[i]) <= tolerance(spec.dtype, want.data[i]))) {
        ADD_FAILURE() << what << "[" << i << "] = " << got << ", reference " << want.data[i];
        ++bad;
      }
    }
  };
  check(q, out_q_storage, false, "q");
  if (k) check(*k, out_k_storage, true, "k");
}

TEST(CpuKernel, SingleCaseSmoke) { run_case(Case{}); }

const char* kScalings[] = {
    "",
    "scaling: {type: linear, factor: 4}\n",
    "scaling: {type: ntk, factor: 3}\n",
    "scaling: {type: dynamic, factor: 2, original_max_position: 3}\n",
    "scaling: {type: yarn, factor: 8, original_max_position: 64, mscale: 1, mscale_all_dim: 0.5}\n",
    "scaling: {type: llama3, factor: 8, original_max_position: 64}\n",
};

TEST(CpuKernel, SweepLayoutsPairingsDtypesScalings) {
  for (const char* layout : {"bshd", "bhsd", "sbhd", "thd"})
    for (const char* pairing : {"half", "interleaved"})
      for (const char* dtype : {"f32", "f16", "bf16"})
        for (const char* scaling : kScalings) {
          Case c;
          c.layout = layout, c.pairing = pairing, c.dtype = dtype, c.scaling = scaling;
          c.head_dim = 20, c.rotary_dim = 12, c.rotary_offset = 4;  // partial, not a vector multiple
          c.B = 2, c.S = 7, c.H = 3, c.Hk = 1, c.offset = 5;
          if (c.layout == "thd") c.B = 1, c.cu_seqlens = {0, 3, 7};
          run_case(c);
        }
}

TEST(CpuKernel, ExplicitPositionsInt32Int64SharedAndOffsets) {
  for (const char* layout : {"bshd", "bhsd", "sbhd", "thd"})
    for (bool i64 : {false, true})
      for (bool shared : {false, true}) {
        Case c;
        c.layout = layout, c.explicit_positions = true, c.int64_positions = i64, c.shared_positions = shared;
        c.head_dim = 128, c.rotary_dim = 128, c.B = 2, c.S = 9, c.H = 4, c.Hk = 2;
        if (c.layout == "thd") c.B = 1;
        run_case(c);
      }
}

TEST(CpuKernel, InPlaceIsExact) {
  // A schedule that stored a member before reading its partner fails here:
  // rows of 1024 dims hold more vectors than there are registers, so the
  // compiler cannot hide the hazard by keeping the loaded values.
  for (const char* layout : {"bshd", "bhsd"})
    for (const char* pairing : {"half", "interleaved"})
      for (const char* dtype : {"f32", "bf16"})
        for (auto [D, R, off] : std::vector<std::tuple<int, int, int>>{{64, 48, 8}, {1032, 1024, 8}}) {
          Case c;
          c.layout = layout, c.pairing = pairing, c.dtype = dtype, c.in_place = true;
          c.head_dim = D, c.rotary_dim = R, c.rotary_offset = off, c.B = 2, c.S = 9, c.H = 3, c.Hk = 2;
          run_case(c);
        }
}

TEST(CpuKernel, OddSizes) {
  for (auto [D, R, off] : std::vector<std::tuple<int, int, int>>{{2, 2, 0}, {4, 4, 0}, {4, 2, 2}, {6, 6, 0}, {130, 34, 96}, {256, 64, 0}})
    for (auto [B, S, H] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {1, 17, 1}, {3, 1, 5}})
      for (const char* pairing : {"half", "interleaved"}) {
        Case c;
        c.head_dim = D, c.rotary_dim = R, c.rotary_offset = off, c.B = B, c.S = S, c.H = H, c.Hk = H;
        c.pairing = pairing;
        run_case(c);
      }
}

TEST(CpuKernel, OutputPairingDiffersFromInputPairing) {
  // DeepSeek-V3 (HF rope_interleave): read (2i, 2i+1), write (i, i + d/2); and the converse.
  for (auto [in, out] : std::vector<std::pair<const char*, const char*>>{{"interleaved", "half"}, {"half", "interleaved"}})
    for (const char* dtype : {"f32", "bf16"}) {
      Case c;
      c.pairing = in, c.output_pairing = out, c.dtype = dtype;
      c.head_dim = 40, c.rotary_dim = 24, c.rotary_offset = 16, c.Hk = 1, c.S = 7;
      run_case(c);
    }
}

TEST(CpuKernel, XposLongRopeAndSchemes) {
  for (const char* extra : {"xpos: {scale_base: 16}\n",
                            "scaling: {type: longrope, factor: 16, original_max_position: 6, short_factor: [1, 2, 3, 4], "
                            "long_factor: [5, 6, 7, 8]}\n",
                            "scaling: {type: longrope, factor: 16, original_max_position: 100, short_factor: [1, 2, 3, 4], "
                            "long_factor: [5, 6, 7, 8]}\n",
                            "frequency: {scheme: pixel, max_freq: 64}\n",
                            "frequency: {scheme: custom, values: [1, 0.5, 0.001, 0]}\n"}) {
    Case c;
    c.head_dim = 8, c.rotary_dim = 8, c.Hk = 2, c.S = 11;
    c.scaling = extra;
    run_case(c);
  }
}

}  // namespace
}  // namespace ropegen

namespace ropegen {
namespace {

// The kernel as built, at long context: every pair holds (1, 0), so the
// outputs are cos and sin of pos * inv_freq, compared with long double.
double max_trig_error(double theta, int64_t max_position) {
  const RopeSpec spec = *parse_spec(fmt::format("name: acc\nhead_dim: 128\npositions: explicit\nlayout: thd\n"
                                                "frequency: {{theta: {}}}\n", theta), "acc");
  const int64_t tokens = 4096;
  std::vector<int64_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t) ids[t] = max_position - t * 997 % max_position;  // spread over the range
  std::vector<float> q(tokens * 128, 0.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < 64; ++i) q[t * 128 + i] = 1.0f;  // half pairing: (x_i, x_{i+64}) = (1, 0)
  runtime::HostStorage in = runtime::to_storage(q, DType::F32), out = in.empty_like();
  lowering::KernelVariant variant;
  variant.position_type = Halide::Int(64);
  runtime::JitKernel kernel(spec, variant, Halide::get_host_target());
  runtime::RopeCall call;
  const std::vector<int64_t> shape = {tokens, 1, 128};
  call.q = runtime::logical_tensor(in.data(), in.type(), Layout::THD, shape, runtime::dense_strides(shape));
  call.out_q = runtime::logical_tensor(out.data(), in.type(), Layout::THD, shape, runtime::dense_strides(shape));
  call.positions = runtime::logical_positions(ids.data(), Halide::Int(64), Layout::THD, {tokens}, 1);
  call.seq_len = max_position + 1;
  kernel.run(call);
  const std::vector<float> got = out.to_float();
  double worst = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int i = 0; i < 64; ++i) {
      const long double angle = static_cast<long double>(ids[t]) * powl(static_cast<long double>(theta), -2.0L * i / 128);
      worst = std::max(worst, static_cast<double>(std::fabs(got[t * 128 + i] - cosl(angle))));
      worst = std::max(worst, static_cast<double>(std::fabs(got[t * 128 + 64 + i] - sinl(angle))));
    }
  return worst;
}

TEST(CpuKernelAccuracy, TrigErrorAtLongPositions) {
  for (int64_t max_position : {int64_t{1} << 20, int64_t{1} << 24})
    for (double theta : {10000.0, 500000.0}) {
      const double err = max_trig_error(theta, max_position);
      std::printf("kernel cos/sin max error, positions up to %lld, theta %g: %.3g\n",
                  static_cast<long long>(max_position), theta, err);
      EXPECT_LT(err, 1e-6);  // float32 rounding of the result is 6e-8
    }
}

}  // namespace
}  // namespace ropegen

namespace ropegen {
namespace {

// q and k sliced from one fused qkv projection [.., Hq + 2 Hk, D] (bshd,
// sbhd) are rotated where they lie, without a copy; v and everything else
// (canaries) is untouched, in place and out of place.
void check_fused_qkv(const char* layout, bool in_place) {
  SCOPED_TRACE(std::string(layout) + (in_place ? " in place" : " out of place"));
  const RopeSpec spec = *parse_spec(fmt::format("name: f\nhead_dim: 16\nrotary_dim: 12\nrotary_offset: 2\n"
                                                "pairing: interleaved\nlayout: {}\n", layout), "f");
  const int64_t B = 2, S = 5, Hq = 4, Hk = 2, H = Hq + 2 * Hk, D = 16;
  const bool sbhd = std::string(layout) == "sbhd";
  const std::vector<int64_t> fused_shape = sbhd ? std::vector<int64_t>{S, B, H, D} : std::vector<int64_t>{B, S, H, D};
  const std::vector<int64_t> strides = runtime::dense_strides(fused_shape);
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
  runtime::RopeCall call;
  call.q = runtime::logical_tensor(fused.data(), Halide::Float(32), spec.layout, shape_with_heads(Hq), strides);
  call.k = runtime::logical_tensor(fused.data() + Hq * D, Halide::Float(32), spec.layout, shape_with_heads(Hk), strides);
  call.out_q = runtime::logical_tensor(dst, Halide::Float(32), spec.layout, shape_with_heads(Hq), strides);
  call.out_k = runtime::logical_tensor(dst + Hq * D, Halide::Float(32), spec.layout, shape_with_heads(Hk), strides);
  call.seq_len = S;
  lowering::KernelVariant variant;
  variant.with_k = true;
  runtime::JitKernel(spec, variant, Halide::get_host_target()).run(call);

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

TEST(CpuKernel, FusedQkvViewsWithoutCopy) {
  for (const char* layout : {"bshd", "sbhd"})
    for (bool in_place : {true, false}) check_fused_qkv(layout, in_place);
}

}  // namespace
}  // namespace ropegen
