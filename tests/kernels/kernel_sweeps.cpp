#include "kernels/kernel_sweeps.h"

#include <tuple>

namespace ropegen::test {
namespace {

const char* kScalings[] = {
    "",
    "scaling: {type: linear, factor: 4}\n",
    "scaling: {type: ntk, factor: 3}\n",
    "scaling: {type: dynamic, factor: 2, original_max_position: 3}\n",
    "scaling: {type: yarn, factor: 8, original_max_position: 64, mscale: 1, mscale_all_dim: 0.5}\n",
    "scaling: {type: llama3, factor: 8, original_max_position: 64}\n",
};

}  // namespace

std::vector<Case> sweep_layouts_pairings_dtypes_scalings() {
  std::vector<Case> cases;
  for (const char* layout : {"bshd", "bhsd", "sbhd", "thd"})
    for (const char* pairing : {"half", "interleaved"})
      for (const char* dtype : {"f32", "f16", "bf16"})
        for (const char* scaling : kScalings) {
          Case c;
          c.layout = layout, c.pairing = pairing, c.dtype = dtype, c.scaling = scaling;
          c.head_dim = 20, c.rotary_dim = 12, c.rotary_offset = 4;  // partial, not a vector multiple
          c.B = 2, c.S = 7, c.H = 3, c.Hk = 1, c.offset = 5;
          if (c.layout == "thd") c.B = 1, c.cu_seqlens = {0, 3, 7};
          cases.push_back(c);
        }
  return cases;
}

std::vector<Case> sweep_explicit_positions() {
  std::vector<Case> cases;
  for (const char* layout : {"bshd", "bhsd", "sbhd", "thd"})
    for (bool i64 : {false, true})
      for (bool shared : {false, true}) {
        Case c;
        c.layout = layout, c.explicit_positions = true, c.int64_positions = i64, c.shared_positions = shared;
        c.head_dim = 128, c.rotary_dim = 128, c.B = 2, c.S = 9, c.H = 4, c.Hk = 2;
        if (c.layout == "thd") c.B = 1;
        cases.push_back(c);
      }
  return cases;
}

std::vector<Case> sweep_in_place() {
  // A schedule that stored a member before reading its partner fails here:
  // rows of 1024 dims hold more vectors than there are registers, so the
  // compiler cannot hide the hazard by keeping the loaded values.
  std::vector<Case> cases;
  for (const char* layout : {"bshd", "bhsd"})
    for (const char* pairing : {"half", "interleaved"})
      for (const char* dtype : {"f32", "bf16"})
        for (auto [D, R, off] : std::vector<std::tuple<int, int, int>>{{64, 48, 8}, {1032, 1024, 8}}) {
          Case c;
          c.layout = layout, c.pairing = pairing, c.dtype = dtype, c.in_place = true;
          c.head_dim = D, c.rotary_dim = R, c.rotary_offset = off, c.B = 2, c.S = 9, c.H = 3, c.Hk = 2;
          cases.push_back(c);
        }
  return cases;
}

std::vector<Case> sweep_odd_sizes() {
  std::vector<Case> cases;
  for (auto [D, R, off] :
       std::vector<std::tuple<int, int, int>>{{2, 2, 0}, {4, 4, 0}, {4, 2, 2}, {6, 6, 0}, {130, 34, 96}, {256, 64, 0}})
    for (auto [B, S, H] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {1, 17, 1}, {3, 1, 5}})
      for (const char* pairing : {"half", "interleaved"}) {
        Case c;
        c.head_dim = D, c.rotary_dim = R, c.rotary_offset = off, c.B = B, c.S = S, c.H = H, c.Hk = H;
        c.pairing = pairing;
        cases.push_back(c);
      }
  return cases;
}

std::vector<Case> sweep_output_pairing() {
  std::vector<Case> cases;
  for (auto [in, out] : std::vector<std::pair<const char*, const char*>>{{"interleaved", "half"}, {"half", "interleaved"}})
    for (const char* dtype : {"f32", "bf16"}) {
      Case c;
      c.pairing = in, c.output_pairing = out, c.dtype = dtype;
      c.head_dim = 40, c.rotary_dim = 24, c.rotary_offset = 16, c.Hk = 1, c.S = 7;
      cases.push_back(c);
    }
  return cases;
}

std::vector<Case> sweep_xpos_longrope_schemes() {
  std::vector<Case> cases;
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
    cases.push_back(c);
  }
  return cases;
}

std::vector<Case> sweep_gpu_shapes() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(c); };
  Case c;
  // cos/sin of a token past 16 KiB: per thread, in registers.
  c = Case{}, c.head_dim = c.rotary_dim = 8192, c.B = 1, c.S = 3, c.H = 2, c.Hk = 1, add(c);
  // Exactly 16 KiB of cos/sin per token: shared, one token per block.
  c = Case{}, c.dtype = "bf16", c.head_dim = c.rotary_dim = 4096, c.B = 1, c.S = 3, c.H = 2, add(c);
  // Many heads (groups of heads), GQA.
  c = Case{}, c.head_dim = c.rotary_dim = 128, c.B = 2, c.S = 33, c.H = 40, c.Hk = 8, add(c);
  // Many token blocks.
  c = Case{}, c.dtype = "bf16", c.pairing = "interleaved", c.head_dim = c.rotary_dim = 64, c.B = 1, c.S = 1000, c.H = 4,
  c.Hk = 1, add(c);
  // bhsd, explicit int64 positions, f16.
  c = Case{}, c.layout = "bhsd", c.dtype = "f16", c.head_dim = c.rotary_dim = 128, c.B = 2, c.S = 50, c.H = 12, c.Hk = 4;
  c.explicit_positions = true, c.int64_positions = true, add(c);
  // thd, five sequences, MLA-like rope dims at the end.
  c = Case{}, c.layout = "thd", c.head_dim = 96, c.rotary_dim = 64, c.rotary_offset = 32, c.B = 1, c.S = 70, c.H = 3;
  c.Hk = 1, c.cu_seqlens = {0, 1, 20, 21, 50, 70}, c.offset = 3, add(c);
  // 5 chunks of 8 pairs (no power of two), odd head count.
  c = Case{}, c.head_dim = c.rotary_dim = 80, c.B = 2, c.S = 9, c.H = 7, c.Hk = 7, add(c);
  // Interleaved bf16, partial, in place.
  c = Case{}, c.dtype = "bf16", c.pairing = "interleaved", c.head_dim = 192, c.rotary_dim = 128, c.B = 1, c.S = 17;
  c.H = 5, c.Hk = 1, c.in_place = true, add(c);
  return cases;
}

std::vector<Case> sweep_qk_norm() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(c); };
  Case c;
  // Qwen3: whole rotary range, GQA.
  c = Case{}, c.head_dim = c.rotary_dim = 128, c.B = 2, c.S = 9, c.H = 4, c.Hk = 2;
  c.qk_norm = "qk_norm: {type: rms, eps: 1.0e-6, weight: per_head}\n", add(c);
  // Gemma's 1 + w, partial interleaved with an offset, bf16, in place, sbhd.
  c = Case{}, c.layout = "sbhd", c.dtype = "bf16", c.pairing = "interleaved", c.head_dim = 64, c.rotary_dim = 32;
  c.rotary_offset = 16, c.B = 2, c.S = 7, c.H = 3, c.Hk = 1, c.in_place = true, c.offset = 11;
  c.qk_norm = "qk_norm: {type: rms_one_plus, eps: 1.0e-6, weight: per_head}\n", add(c);
  // No weight, f16, thd with explicit int64 ids over three sequences, a scaling.
  c = Case{}, c.layout = "thd", c.dtype = "f16", c.head_dim = 256, c.rotary_dim = 64, c.B = 1, c.S = 13, c.H = 2;
  c.Hk = 2, c.explicit_positions = true, c.int64_positions = true, c.cu_seqlens = {0, 4, 5, 13};
  c.scaling = "scaling: {type: yarn, factor: 8, original_max_position: 64}\n";
  c.qk_norm = "qk_norm: {type: rms, eps: 0.001, weight: none}\n", add(c);
  // DeepSeek-V3's read interleaved, write half, on a head dim no vector
  // multiple, bhsd, dims on both sides of the rotary range.
  c = Case{}, c.layout = "bhsd", c.pairing = "interleaved", c.output_pairing = "half", c.head_dim = 130;
  c.rotary_dim = 34, c.rotary_offset = 90, c.B = 2, c.S = 5, c.H = 5, c.Hk = 3;
  c.qk_norm = "qk_norm: {type: rms, eps: 1.0e-5, weight: per_head}\n", add(c);
  // q alone, bf16, out of place, one token.
  c = Case{}, c.dtype = "bf16", c.head_dim = 128, c.rotary_dim = 96, c.B = 3, c.S = 1, c.H = 8, c.Hk = 0, c.offset = 4000;
  c.qk_norm = "qk_norm: {type: rms_one_plus, eps: 1.0e-6, weight: per_head}\n", add(c);
  // Mixed precision: bf16 and f16 rows with float32 weights (not rounded to the dtype).
  c = Case{}, c.dtype = "bf16", c.head_dim = c.rotary_dim = 128, c.B = 2, c.S = 6, c.H = 4, c.Hk = 2;
  c.qk_norm = "qk_norm: {type: rms, eps: 1.0e-6, weight: per_head}\n", c.float32_norm_weights = true, add(c);
  c = Case{}, c.layout = "thd", c.dtype = "f16", c.head_dim = 64, c.rotary_dim = 32, c.B = 1, c.S = 9, c.H = 3;
  c.Hk = 1, c.explicit_positions = true, c.cu_seqlens = {0, 4, 9};
  c.qk_norm = "qk_norm: {type: rms_one_plus, eps: 1.0e-5, weight: per_head}\n", c.float32_norm_weights = true, add(c);
  return cases;
}

std::vector<Case> sweep_fp8_output() {
  std::vector<Case> cases;
  auto add = [&](Case c) { cases.push_back(c); };
  Case c;
  // GQA, whole rotary range; q's scale saturates most of it (|x| / 0.005 > 448).
  c = Case{}, c.head_dim = c.rotary_dim = 64, c.B = 2, c.S = 7, c.H = 4, c.Hk = 2;
  c.output_dtype = "fp8_e4m3", c.q_scale = 0.005f, c.k_scale = 3.0f, add(c);
  // bf16, partial interleaved with dims on both sides, packed tokens at explicit ids, a scaling.
  c = Case{}, c.layout = "thd", c.dtype = "bf16", c.pairing = "interleaved", c.head_dim = 64, c.rotary_dim = 32;
  c.rotary_offset = 16, c.B = 1, c.S = 11, c.H = 3, c.Hk = 1, c.explicit_positions = true, c.cu_seqlens = {0, 5, 11};
  c.scaling = "scaling: {type: llama3, factor: 8, original_max_position: 64}\n";
  c.output_dtype = "fp8_e4m3", c.q_scale = 0.25f, c.k_scale = 0.7f, add(c);
  // fp8_e5m2, f16, q alone, a head dim no vector multiple, bhsd; 57344 saturates at |x| > 5.7.
  c = Case{}, c.layout = "bhsd", c.dtype = "f16", c.head_dim = 130, c.rotary_dim = 34, c.rotary_offset = 90;
  c.B = 2, c.S = 5, c.H = 3, c.offset = 900, c.output_dtype = "fp8_e5m2", c.q_scale = 1e-4f, add(c);
  // DeepSeek's MLA head: nope dims, then rope dims read interleaved and written half; sbhd.
  c = Case{}, c.layout = "sbhd", c.dtype = "bf16", c.pairing = "interleaved", c.output_pairing = "half";
  c.head_dim = 192, c.rotary_dim = 64, c.rotary_offset = 128, c.B = 2, c.S = 3, c.H = 4, c.Hk = 1;
  c.output_dtype = "fp8_e4m3", add(c);
  // QK-norm + RoPE + fp8: Qwen3's heads, bf16.
  c = Case{}, c.dtype = "bf16", c.head_dim = c.rotary_dim = 128, c.B = 2, c.S = 4, c.H = 4, c.Hk = 2;
  c.qk_norm = "qk_norm: {type: rms, eps: 1.0e-6, weight: per_head}\n";
  c.output_dtype = "fp8_e4m3", c.q_scale = 0.01f, c.k_scale = 0.03f, add(c);
  // One token, one head, the smallest head.
  c = Case{}, c.dtype = "f16", c.head_dim = c.rotary_dim = 2, c.B = 1, c.S = 1, c.H = 1, c.Hk = 1, c.offset = 7;
  c.output_dtype = "fp8_e5m2", c.q_scale = 0.3f, c.k_scale = 5.0f, add(c);
  // FlashInfer's rule (fp8_scale: multiply): codes of x * scale, scales that are no power of two (a scale on
  // the wrong side saturates or flushes most codes); MLA-like [nope | rope] rows, half pairing.
  c = Case{}, c.layout = "thd", c.dtype = "bf16", c.head_dim = 96, c.rotary_dim = 32, c.rotary_offset = 64;
  c.B = 1, c.S = 6, c.H = 3, c.Hk = 1, c.explicit_positions = true, c.output_dtype = "fp8_e4m3";
  c.q_scale = 37.3f, c.k_scale = 0.61f, c.multiply_scales = true, add(c);
  // The inverse rotation (backward) with fp8 outputs, GQA, per-tensor scales.
  c = Case{}, c.dtype = "bf16", c.pairing = "interleaved", c.head_dim = 64, c.rotary_dim = 16, c.rotary_offset = 48;
  c.B = 2, c.S = 3, c.H = 4, c.Hk = 2, c.backward = true, c.output_dtype = "fp8_e4m3", c.q_scale = 0.02f;
  c.k_scale = 0.5f, add(c);
  // output_quant: DeepSeek-V4's attention output rotated back, ue8m0 scales per 128 dims of a 512-dim
  // head (nope 448, rope 64 interleaved); float32 scales per 16 dims, forward, thd; e5m2 per 2 dims.
  c = Case{}, c.layout = "thd", c.dtype = "bf16", c.pairing = "interleaved", c.head_dim = 512, c.rotary_dim = 64;
  c.rotary_offset = 448, c.B = 1, c.S = 5, c.H = 3, c.explicit_positions = true, c.backward = true;
  c.output_dtype = "fp8_e4m3", c.quant_group = 128, add(c);
  c = Case{}, c.layout = "thd", c.dtype = "f32", c.head_dim = 64, c.rotary_dim = 32, c.B = 1, c.S = 7, c.H = 2;
  c.cu_seqlens = {0, 3, 7}, c.output_dtype = "fp8_e4m3", c.quant_group = 16, c.float32_scales = true, add(c);
  c = Case{}, c.layout = "bhsd", c.dtype = "f16", c.head_dim = 6, c.rotary_dim = 4, c.B = 2, c.S = 3, c.H = 2;
  c.output_dtype = "fp8_e5m2", c.quant_group = 2, add(c);
  return cases;
}

std::vector<Case> backward_of(std::vector<Case> cases) {
  for (Case& c : cases) {
    c.backward = true;
    // The backward of qk_norm with weights does not run in place (call/call_views).
    if (c.qk_norm.find("per_head") != std::string::npos) c.in_place = false;
  }
  return cases;
}

}  // namespace ropegen::test
