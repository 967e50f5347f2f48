// Invalid specs: each gives FILE:LINE:COL: error: ... at the offending node,
// with what is allowed. Messages are asserted literally.
#include <gtest/gtest.h>

#include "dsl/spec_diagnostics.h"
#include "ropegen/spec_io.h"

namespace ropegen {
namespace {

using test::errors_of;

struct ErrorCase {
  const char* label;
  const char* yaml;
  const char* expected;
};

class SpecErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SpecErrors, ReportsPreciseLocationAndMessage) {
  EXPECT_EQ(errors_of(GetParam().yaml), GetParam().expected) << GetParam().yaml;
}

const ErrorCase kCases[] = {
    {"unknown_key_did_you_mean", "name: a\nhead_dim: 8\nrotary_dims: 4\n",
     "s.yaml:3:1: error: unknown key `rotary_dims` for encoding `rope`; allowed: name, encoding, head_dim, "
     "rotary_dim, rotary_offset, pairing, output_pairing, layout, dtype, frequency, scaling, xpos, positions, axes, kv_cache, qk_norm, output_dtype, output_quant, fp8_scale; "
     "did you mean `rotary_dim`?\n"},
    {"missing_name", "head_dim: 8\n", "s.yaml:1:1: error: missing required key `name`\n"},
    {"head_dim_wrong_type", "name: a\nhead_dim: big\n",
     "s.yaml:2:11: error: `head_dim` must be an integer, got `big`\n"},
    {"head_dim_quoted", "name: a\nhead_dim: '8'\n",
     "s.yaml:2:11: error: `head_dim` must be an integer (remove the quotes), got `8`\n"},
    {"head_dim_float", "name: a\nhead_dim: 8.5\n", "s.yaml:2:11: error: `head_dim` must be an integer, got `8.5`\n"},
    {"odd_head_dim", "name: a\nhead_dim: 7\n", "s.yaml:2:11: error: head_dim (7) must be even and in 2..16384\n"},
    {"odd_rotary_dim", "name: a\nhead_dim: 128\nrotary_dim: 65\n",
     "s.yaml:3:13: error: rotary_dim (65) must be even and in 2..128 (head_dim 128 - rotary_offset 0)\n"},
    {"rotary_dim_too_large", "name: a\nhead_dim: 128\nrotary_dim: 130\n",
     "s.yaml:3:13: error: rotary_dim (130) must be even and in 2..128 (head_dim 128 - rotary_offset 0)\n"},
    {"rotary_past_end_with_offset", "name: a\nhead_dim: 16\nrotary_offset: 8\nrotary_dim: 10\n",
     "s.yaml:4:13: error: rotary_dim (10) must be even and in 2..8 (head_dim 16 - rotary_offset 8)\n"},
    {"name_is_a_path", "name: ../../etc/passwd\nhead_dim: 8\n",
     "s.yaml:1:7: error: name `../../etc/passwd` must be an identifier: [a-z_][a-z0-9_]*, at most 64 characters "
     "(it prefixes every emitted symbol and is never a path)\n"},
    {"bad_enum_did_you_mean", "name: a\nhead_dim: 8\npairing: interleave\n",
     "s.yaml:3:10: error: unknown pairing `interleave`; allowed: half, interleaved; did you mean `interleaved`?\n"},
    {"bad_layout", "name: a\nhead_dim: 8\nlayout: bsdh\n",
     "s.yaml:3:9: error: unknown layout `bsdh`; allowed: bshd, bhsd, sbhd, thd; did you mean `bshd`?\n"},
    {"non_positive_theta", "name: a\nhead_dim: 8\nfrequency:\n  theta: 0\n",
     "s.yaml:4:10: error: theta (0) must be > 0\n"},
    {"key_of_another_scheme", "name: a\nhead_dim: 8\nfrequency:\n  scheme: pixel\n  theta: 10\n",
     "s.yaml:5:3: error: `theta` does not belong to frequency scheme `pixel`; it is used by scheme lang\n"},
    {"custom_wrong_length", "name: a\nhead_dim: 8\nfrequency: {scheme: custom, values: [1, 2, 3]}\n",
     "s.yaml:3:37: error: frequency.values has 3 entries but needs rotary_dim / 2 = 4 (one per rotary pair)\n"},
    {"custom_missing_values", "name: a\nhead_dim: 8\nfrequency:\n  scheme: custom\n",
     "s.yaml:4:3: error: frequency scheme `custom` needs `values`\n"},
    {"scaling_needs_type", "name: a\nhead_dim: 8\nscaling:\n  factor: 2\n", "s.yaml:4:3: error: scaling needs `type`\n"},
    {"non_positive_factor", "name: a\nhead_dim: 8\nscaling: {type: linear, factor: -2}\n",
     "s.yaml:3:33: error: factor (-2) must be > 0\n"},
    {"field_of_another_type", "name: a\nhead_dim: 8\nscaling: {type: linear, factor: 2, mscale: 1}\n",
     "s.yaml:3:36: error: `mscale` does not belong to scaling type `linear`; it is used by type yarn\n"},
    {"beta_order", "name: a\nhead_dim: 8\nscaling:\n  type: yarn\n  factor: 4\n  original_max_position: 4096\n"
                   "  beta_fast: 1\n  beta_slow: 32\n",
     "s.yaml:7:14: error: beta_fast (1) must be greater than beta_slow (32)\n"},
    {"longrope_list_length",
     "name: a\nhead_dim: 8\nscaling:\n  type: longrope\n  factor: 2\n  original_max_position: 4096\n"
     "  short_factor: [1, 1, 1, 1]\n  long_factor: [1, 1]\n",
     "s.yaml:8:16: error: scaling.long_factor has 2 entries but needs rotary_dim / 2 = 4 (one per rotary pair)\n"},
    {"longrope_missing_lists", "name: a\nhead_dim: 8\nscaling: {type: longrope, factor: 2, original_max_position: 9}\n",
     "s.yaml:3:10: error: scaling type `longrope` needs `short_factor`\n"
     "s.yaml:3:10: error: scaling type `longrope` needs `long_factor`\n"},
    {"unknown_scaling_type", "name: a\nhead_dim: 8\nscaling: {type: ntk_aware}\n",
     "s.yaml:3:17: error: unknown type `ntk_aware`; allowed: none, linear, ntk, dynamic, yarn, longrope, llama3\n"},
    {"ntk_single_pair", "name: a\nhead_dim: 2\nscaling: {type: ntk, factor: 2}\n",
     "s.yaml:3:17: error: scaling type `ntk` needs rotary_dim >= 4 (its exponent is rotary_dim / (rotary_dim - 2))\n"},
    {"yarn_with_pixel", "name: a\nhead_dim: 8\nfrequency: {scheme: pixel}\n"
                        "scaling: {type: yarn, factor: 2, original_max_position: 64}\n",
     "s.yaml:4:17: error: scaling type `yarn` rescales theta and needs frequency scheme `lang` (got `pixel`)\n"},
    {"llama3_band_order",
     "name: a\nhead_dim: 8\nscaling: {type: llama3, factor: 8, original_max_position: 8192, low_freq_factor: 4, "
     "high_freq_factor: 1}\n",
     "s.yaml:3:103: error: high_freq_factor (1) must be greater than low_freq_factor (4)\n"},
    {"xpos_non_positive", "name: a\nhead_dim: 8\nxpos: {scale_base: 0}\n",
     "s.yaml:3:20: error: scale_base (0) must be >= 1\n"},
    {"duplicate_key", "name: a\nhead_dim: 8\nhead_dim: 16\n", "s.yaml:3:1: error: duplicate key `head_dim` in spec\n"},
    {"not_a_map", "- name: a\n", "s.yaml:1:1: error: a spec must be a YAML mapping of keys such as `name:` and "
                                 "`head_dim:`\n"},
    {"empty", "", "s.yaml: error: a spec must be a YAML mapping of keys such as `name:` and `head_dim:`\n"},
    {"yaml_syntax", "name: a\nhead_dim: [8\n", "s.yaml:3:1: error: invalid YAML: end of sequence flow not found\n"},
    {"nan_number", "name: a\nhead_dim: 8\nfrequency: {theta: .nan}\n",
     "s.yaml:3:20: error: `theta` must be a number (finite, unquoted), got `.nan`\n"},
    {"section_not_map", "name: a\nhead_dim: 8\nscaling: linear\n",
     "s.yaml:3:10: error: `scaling` must be a mapping, got `linear`\n"},
    {"several_errors_at_once", "name: A\nhead_dim: 8\nlayot: bshd\ndtype: f64\n",
     "s.yaml:3:1: error: unknown key `layot` for encoding `rope`; allowed: name, encoding, head_dim, rotary_dim, "
     "rotary_offset, pairing, output_pairing, layout, dtype, frequency, scaling, xpos, positions, axes, kv_cache, qk_norm, output_dtype, output_quant, fp8_scale; did you mean "
     "`layout`?\n"
     "s.yaml:4:8: error: unknown dtype `f64`; allowed: f32, f16, bf16; did you mean `f32`?\n"},
    {"missing_head_dim", "name: a\n", "s.yaml:1:1: error: encoding `rope` needs `head_dim`\n"},
    {"rope_with_row_layout", "name: a\nhead_dim: 8\nlayout: bsd\n",
     "s.yaml:3:9: error: layout `bsd` does not belong to encoding `rope`; it is used by encoding sinusoidal, learned; "
     "allowed: bshd, bhsd, sbhd, thd\n"},
    {"unknown_encoding", "name: a\nencoding: sinusoid\ndim: 8\n",
     "s.yaml:2:11: error: unknown encoding `sinusoid`; allowed: rope, sinusoidal, learned, alibi; did you mean "
     "`sinusoidal`?\n"},
    // Multi-axis RoPE.
    {"axes_sections_sum", "name: a\nhead_dim: 16\npositions: explicit\naxes: {sections: [2, 3, 2]}\n",
     "s.yaml:4:18: error: axes.sections sum to 7 but must sum to rotary_dim / 2 = 8 (every rotary pair belongs to one "
     "axis)\n"},
    {"axes_sections_follow_rotary_dim", "name: a\nhead_dim: 16\nrotary_dim: 8\npositions: explicit\naxes:\n"
                                        "  sections: [4, 4]\n",
     "s.yaml:6:13: error: axes.sections sum to 8 but must sum to rotary_dim / 2 = 4 (every rotary pair belongs to one "
     "axis)\n"},
    {"axes_with_implicit_positions", "name: a\nhead_dim: 8\naxes: {sections: [2, 2]}\n",
     "s.yaml:3:7: error: axes need `positions: explicit` (the positions carry a trailing dim with one entry per "
     "axis)\n"},
    {"axes_section_zero", "name: a\nhead_dim: 8\npositions: explicit\naxes: {sections: [4, 0]}\n",
     "s.yaml:4:22: error: axes.sections[1] (0) must be in 1..4 (rotary_dim / 2)\n"},
    {"axes_too_many", "name: a\nhead_dim: 32\npositions: explicit\naxes: {sections: [2, 2, 2, 2, 2, 2, 2, 1, 1]}\n",
     "s.yaml:4:18: error: axes.sections has 9 entries but needs 1..8 (one per position axis)\n"},
    {"axes_sections_not_integers", "name: a\nhead_dim: 8\npositions: explicit\naxes: {sections: [2.5, 1.5]}\n",
     "s.yaml:4:18: error: `sections` must be a list of integers, got a list\n"},
    {"axes_need_sections", "name: a\nhead_dim: 8\npositions: explicit\naxes: {interleaved: true}\n",
     "s.yaml:4:7: error: axes needs `sections`\n"},
    {"axes_unknown_key", "name: a\nhead_dim: 8\npositions: explicit\naxes: {sections: [4], interleave: true}\n",
     "s.yaml:4:23: error: unknown key `interleave` in axes; allowed: sections, interleaved, per_axis_frequencies; did "
     "you mean `interleaved`?\n"},
    {"axes_with_xpos", "name: a\nhead_dim: 8\npositions: explicit\nxpos: {}\naxes: {sections: [2, 2]}\n",
     "s.yaml:5:7: error: axes cannot be combined with xpos: its scale depends on a single position and the run-time "
     "seq_len\n"},
    {"axes_with_dynamic", "name: a\nhead_dim: 8\npositions: explicit\n"
                          "scaling: {type: dynamic, factor: 2, original_max_position: 64}\naxes: {sections: [2, 2]}\n",
     "s.yaml:5:7: error: axes cannot be combined with scaling type `dynamic`: its frequencies depend on the run-time "
     "seq_len, which multi-axis positions do not define\n"},
    {"axes_with_longrope_per_call",
     "name: a\nhead_dim: 4\npositions: explicit\nscaling: {type: longrope, factor: 2, original_max_position: 64, "
     "short_factor: [1, 1], long_factor: [2, 2]}\naxes: {sections: [1, 1]}\n",
     "s.yaml:5:7: error: axes cannot be combined with scaling type `longrope` with policy per_call: its frequencies "
     "depend on the run-time seq_len, which multi-axis positions do not define\n"},
    {"axes_interleaved_too_wide", "name: a\nhead_dim: 16\npositions: explicit\n"
                                  "axes: {sections: [2, 3, 3], interleaved: true}\n",
     "s.yaml:4:42: error: interleaved axes give axis a >= 1 the pairs a, a + n_axes, ... (sections[a] of them); axis "
     "2's last would be pair 8, past the 8 pairs of rotary_dim / 2\n"},
    // Run-time frequencies.
    {"runtime_with_scaling", "name: a\nhead_dim: 8\nfrequency: {scheme: runtime}\nscaling: {type: linear, factor: 2}\n",
     "s.yaml:4:17: error: scaling type `linear` cannot be used with frequency scheme `runtime`: the frequencies are "
     "given at run time, so scaling cannot be applied to them (use type none)\n"},
    {"runtime_with_theta", "name: a\nhead_dim: 8\nfrequency: {scheme: runtime, theta: 10000}\n",
     "s.yaml:3:30: error: `theta` does not belong to frequency scheme `runtime`; it is used by scheme lang\n"},
    {"runtime_per_axis_frequencies",
     "name: a\nhead_dim: 8\npositions: explicit\nfrequency: {scheme: runtime}\n"
     "axes: {sections: [2, 2], per_axis_frequencies: true}\n",
     "s.yaml:5:48: error: per_axis_frequencies cannot be used with frequency scheme `runtime`: the inv_freq tensor "
     "already gives every pair's frequency\n"},
    // Cos/sin read from the call's cache.
    {"table_with_scaling",
     "name: a\nhead_dim: 8\nfrequency: {scheme: table}\nscaling: {type: yarn, factor: 4, original_max_position: 64}\n",
     "s.yaml:4:17: error: scaling type `yarn` cannot be used with frequency scheme `table`: cos_sin_cache holds cos "
     "and sin as they are used (scaled, the attention factor included), so there is nothing to scale; leave scaling "
     "out (or use type none)\n"},
    {"table_with_theta", "name: a\nhead_dim: 8\nfrequency: {scheme: table, theta: 10000}\n",
     "s.yaml:3:28: error: `theta` does not belong to frequency scheme `table`; it is used by scheme lang\n"},
    {"table_with_xpos", "name: a\nhead_dim: 8\nfrequency: {scheme: table}\nxpos: {scale_base: 64}\n",
     "s.yaml:4:7: error: xpos cannot be used with frequency scheme `table`: a cos/sin cache has no xPos scale "
     "(queries and keys are scaled differently)\n"},
    {"table_per_axis_frequencies",
     "name: a\nhead_dim: 8\npositions: explicit\nfrequency: {scheme: table}\n"
     "axes: {sections: [2, 2], per_axis_frequencies: true}\n",
     "s.yaml:5:48: error: per_axis_frequencies cannot be used with frequency scheme `table`: cos_sin_cache already "
     "gives every pair's cos and sin\n"},
    {"table_misspelt", "name: a\nhead_dim: 8\nfrequency: {scheme: tabel}\n",
     "s.yaml:3:21: error: unknown scheme `tabel`; allowed: lang, pixel, constant, custom, runtime, table; did you mean "
     "`table`?\n"},
    // Fused KV-cache append.
    {"qk_norm_eps_zero", "name: a\nhead_dim: 8\nqk_norm: {type: rms, eps: 0}\n",
     "s.yaml:3:27: error: eps (0) must be > 0 and a float32 normal number (1.2e-38 .. 3.4e38)\n"},
    {"qk_norm_eps_negative", "name: a\nhead_dim: 8\nqk_norm: {eps: -1}\n",
     "s.yaml:3:16: error: eps (-1) must be > 0 and a float32 normal number (1.2e-38 .. 3.4e38)\n"},
    {"qk_norm_eps_missing", "name: a\nhead_dim: 8\nqk_norm: {type: rms}\n", "s.yaml:3:10: error: qk_norm needs `eps`\n"},
    {"qk_norm_type_unknown", "name: a\nhead_dim: 8\nqk_norm: {type: layer, eps: 1.0e-6}\n",
     "s.yaml:3:17: error: unknown type `layer`; allowed: rms, rms_one_plus\n"},
    {"qk_norm_weight_unknown", "name: a\nhead_dim: 8\nqk_norm: {eps: 1.0e-6, weight: per_token}\n",
     "s.yaml:3:32: error: unknown weight `per_token`; allowed: per_head, none\n"},
    {"output_dtype_other_float", "name: a\nhead_dim: 8\ndtype: bf16\noutput_dtype: f32\n",
     "s.yaml:4:15: error: output_dtype `f32` differs from dtype `bf16`: rope outputs have the spec's dtype or are fp8 "
     "codes (fp8_e4m3, fp8_e5m2)\n"},
    {"output_dtype_unknown", "name: a\nhead_dim: 8\noutput_dtype: fp8\n",
     "s.yaml:3:15: error: unknown output_dtype `fp8`; allowed: f32, f16, bf16, fp8_e4m3, fp8_e5m2; did you mean "
     "`f32`?\n"},
    {"output_quant_group_not_dividing", "name: a\nhead_dim: 8\noutput_dtype: fp8_e4m3\noutput_quant: {group: 3}\n",
     "s.yaml:4:23: error: output_quant.group (3) must divide head_dim (8): a row's dims form whole groups\n"},
    {"output_quant_without_fp8", "name: a\nhead_dim: 8\noutput_quant: {group: 4, scale: float32}\n",
     "s.yaml:3:15: error: output_quant needs `output_dtype: fp8_e4m3 | fp8_e5m2`: it chooses the scales of fp8 "
     "codes\n"},
    {"output_quant_scale_unknown", "name: a\nhead_dim: 8\noutput_dtype: fp8_e4m3\noutput_quant: {group: 4, scale: e8m0}\n",
     "s.yaml:4:33: error: unknown scale `e8m0`; allowed: ue8m0, float32; did you mean `ue8m0`?\n"},
    {"fp8_scale_without_fp8", "name: a\nhead_dim: 8\nfp8_scale: multiply\n",
     "s.yaml:3:12: error: fp8_scale needs fp8 codes to scale: `output_dtype: fp8_e4m3 | fp8_e5m2` or an fp8 "
     "kv_cache\n"},
    {"fp8_scale_unknown", "name: a\nhead_dim: 8\noutput_dtype: fp8_e4m3\nfp8_scale: times\n",
     "s.yaml:4:12: error: unknown fp8_scale `times`; allowed: divide, multiply\n"},
    {"fp8_scale_multiply_with_output_quant",
     "name: a\nhead_dim: 8\noutput_dtype: fp8_e4m3\noutput_quant: {group: 4}\nfp8_scale: multiply\n",
     "s.yaml:5:12: error: fp8_scale: multiply has no per-tensor scale to apply with output_quant (its scales divide)\n"},
    {"output_dtype_on_sinusoidal", "name: a\nencoding: sinusoidal\ndim: 8\noutput_dtype: fp8_e4m3\n",
     "s.yaml:4:1: error: `output_dtype` does not belong to encoding `sinusoidal`; it is used by encoding rope\n"},
    {"qk_norm_on_alibi", "name: a\nencoding: alibi\nnum_heads: 4\nqk_norm: {eps: 1.0e-6}\n",
     "s.yaml:4:1: error: `qk_norm` does not belong to encoding `alibi`; it is used by encoding rope\n"},
    {"kv_cache_needs_thd", "name: a\nhead_dim: 8\npositions: explicit\nkv_cache: {layout: paged_nhd}\n", 
     "s.yaml:4:11: error: kv_cache needs `layout: thd` (tokens [T, H, D], as FlashInfer and vLLM append "
     "them); got `bshd`\n"},
    {"kv_cache_layout_bshd", "name: a\nhead_dim: 8\nlayout: bshd\npositions: explicit\nkv_cache: {}\n", 
     "s.yaml:3:9: error: kv_cache needs `layout: thd` (tokens [T, H, D], as FlashInfer and vLLM append "
     "them); got `bshd`\n"},
    {"kv_cache_implicit_positions", "name: a\nhead_dim: 8\nlayout: thd\nkv_cache: {layout: contiguous}\n", 
     "s.yaml:4:11: error: kv_cache needs `positions: explicit`: a token's position also says where it "
     "goes in the cache\n"},
    {"kv_cache_page_size_zero",
     "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: paged_hnd, page_size: 0}\n", 
     "s.yaml:5:42: error: page_size (0) must be in 1..65536\n"},
    {"kv_cache_contiguous_page_size",
     "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: contiguous, page_size: 16}\n", 
     "s.yaml:5:32: error: `page_size` does not belong to kv_cache layout `contiguous`; it is used by "
     "layout paged_nhd, paged_hnd\n"},
    {"kv_cache_fp8_scale_unknown",
     "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {dtype: fp8_e4m3, scale: per_token}\n", 
     "s.yaml:5:36: error: unknown scale `per_token`; allowed: per_tensor\n"},
    {"kv_cache_scale_without_fp8",
     "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {dtype: bf16, scale: per_tensor}\n", 
     "s.yaml:5:32: error: kv_cache scale is for fp8 caches; dtype `bf16` stores values as they are (leave "
     "scale out)\n"},
    {"kv_cache_layout_misspelt", "name: a\nhead_dim: 8\nlayout: thd\npositions: explicit\nkv_cache: {layout: paged}\n",
     
     "s.yaml:5:20: error: unknown layout `paged`; allowed: paged_nhd, paged_hnd, contiguous\n"},
    // Sinusoidal, learned, alibi.
    {"sinusoidal_with_rope_layout", "name: a\nencoding: sinusoidal\ndim: 64\nlayout: bshd\n",
     "s.yaml:4:9: error: layout `bshd` does not belong to encoding `sinusoidal`; it is used by encoding rope; allowed: "
     "bsd, sbd, td\n"},
    {"sinusoidal_missing_dim", "name: a\nencoding: sinusoidal\n",
     "s.yaml:1:1: error: encoding `sinusoidal` needs `dim`\n"},
    {"sinusoidal_with_head_dim", "name: a\nencoding: sinusoidal\nhead_dim: 64\n",
     "s.yaml:3:1: error: `head_dim` does not belong to encoding `sinusoidal`; it is used by encoding rope\n"
     "s.yaml:1:1: error: encoding `sinusoidal` needs `dim`\n"},
    {"sinusoidal_base_non_positive", "name: a\nencoding: sinusoidal\ndim: 8\nbase: -1\n",
     "s.yaml:4:7: error: base (-1) must be > 0\n"},
    {"sinusoidal_table_form_did_you_mean", "name: a\nencoding: sinusoidal\ndim: 8\ntable_form: roformr\n",
     "s.yaml:4:13: error: unknown table_form `roformr`; allowed: interleaved, roformer; did you mean `roformer`?\n"},
    {"learned_dim_zero", "name: a\nencoding: learned\ndim: 0\n", "s.yaml:3:6: error: dim (0) must be in 1..1048576\n"},
    {"learned_with_table_form", "name: a\nencoding: learned\ndim: 8\ntable_form: roformer\n",
     "s.yaml:4:1: error: `table_form` does not belong to encoding `learned`; it is used by encoding sinusoidal\n"},
    {"alibi_unknown_key_did_you_mean", "name: a\nencoding: alibi\nnum_head: 8\n",
     "s.yaml:3:1: error: unknown key `num_head` for encoding `alibi`; allowed: name, encoding, num_heads, form, dtype; "
     "did you mean `num_heads`?\n"
     "s.yaml:1:1: error: encoding `alibi` needs `num_heads`\n"},
    {"alibi_num_heads_zero", "name: a\nencoding: alibi\nnum_heads: 0\n",
     "s.yaml:3:12: error: num_heads (0) must be in 1..65536\n"},
    {"alibi_has_no_layout", "name: a\nencoding: alibi\nnum_heads: 8\nlayout: bshd\n",
     "s.yaml:4:1: error: `layout` does not belong to encoding `alibi`; it is used by encoding rope, sinusoidal, "
     "learned\n"},
    {"alibi_form_did_you_mean", "name: a\nencoding: alibi\nnum_heads: 8\nform: casual\n",
     "s.yaml:4:7: error: unknown form `casual`; allowed: symmetric, causal, bloom; did you mean `causal`?\n"},
    // Hostile numbers: integers that would overflow, absurd but finite floats.
    // Each is refused at the key responsible, never normalised or passed on.
    {"rotary_dim_overflow", "name: a\nhead_dim: 128\nrotary_offset: 126\nrotary_dim: 9223372036854775806\n",
     "s.yaml:4:13: error: rotary_dim (9223372036854775806) must be even and in 2..2 (head_dim 128 - rotary_offset 126)\n"},
    {"rotary_offset_huge", "name: a\nhead_dim: 128\nrotary_offset: 9223372036854775807\n",
     "s.yaml:3:16: error: rotary_offset (9223372036854775807) must be in 0..126 (head_dim - 2) so at least one pair is rotated\n"},
    {"head_dim_beyond_int64", "name: a\nhead_dim: 9223372036854775808\n",
     "s.yaml:2:11: error: `head_dim` must be an integer, got `9223372036854775808`\n"},
    {"head_dim_most_negative", "name: a\nhead_dim: -9223372036854775808\n",
     "s.yaml:2:11: error: head_dim (-9223372036854775808) must be even and in 2..16384\n"},
    {"original_max_position_huge", "name: a\nhead_dim: 8\nscaling: {type: dynamic, factor: 2, original_max_position: 9223372036854775807}\n",
     "s.yaml:3:60: error: original_max_position (9223372036854775807) must be in 2..4294967296 (2^32, the largest position)\n"},
    {"axes_section_huge", "name: a\nhead_dim: 8\npositions: explicit\naxes: {sections: [9223372036854775807, 9223372036854775807]}\n",
     "s.yaml:4:19: error: axes.sections[0] (9223372036854775807) must be in 1..4 (rotary_dim / 2)\n"},
    {"dim_huge", "name: a\nencoding: sinusoidal\ndim: 9223372036854775807\n",
     "s.yaml:3:6: error: dim (9223372036854775807) must be in 1..1048576\n"},
    {"num_heads_huge", "name: a\nencoding: alibi\nnum_heads: 4294967297\n",
     "s.yaml:3:12: error: num_heads (4294967297) must be in 1..65536\n"},
    {"theta_tiny", "name: a\nhead_dim: 8\nfrequency: {theta: 5e-324}\n",
     "s.yaml:3:20: error: theta (5e-324) gives inv_freq[1] = 6.707394273891462e+80; every frequency must be finite and in (0, 1024]\n"},
    {"linear_factor_tiny", "name: a\nhead_dim: 8\nscaling: {type: linear, factor: 1e-320}\n",
     "s.yaml:3:33: error: factor (1e-320) gives inv_freq[0] = inf; every frequency must be finite and in (0, 1024]\n"},
    {"pixel_max_freq_huge", "name: a\nhead_dim: 8\nfrequency: {scheme: pixel, max_freq: 1e308}\n",
     "s.yaml:3:38: error: max_freq (1e308) gives inv_freq[1] = 5.235987755982989e+307; every frequency must be finite and in (0, 1024]\n"},
    {"constant_value_huge", "name: a\nhead_dim: 8\nfrequency: {scheme: constant, value: 1e308}\n",
     "s.yaml:3:38: error: value (1e308) gives inv_freq[0] = 1e+308; every frequency must be finite and in [0, 1024]\n"},
    {"constant_value_negative", "name: a\nhead_dim: 8\nfrequency: {scheme: constant, value: -1}\n",
     "s.yaml:3:38: error: value (-1) gives inv_freq[0] = -1; every frequency must be finite and in [0, 1024]\n"},
    {"custom_value_negative", "name: a\nhead_dim: 8\nfrequency: {scheme: custom, values: [1, 0, -1, 0.5]}\n",
     "s.yaml:3:44: error: frequency.values[2] (-1) gives inv_freq[2] = -1; every frequency must be finite and in [0, 1024]\n"},
    {"custom_times_linear_too_fast", "name: a\nhead_dim: 8\nfrequency: {scheme: custom, values: [1000, 1, 1, 1]}\nscaling: {type: linear, factor: 0.5}\n",
     "s.yaml:3:38: error: frequency.values[0] (1000) gives inv_freq[0] = 2000; every frequency must be finite and in [0, 1024]\n"},
    {"ntk_factor_huge", "name: a\nhead_dim: 8\nscaling: {type: ntk, factor: 1e308}\n",
     "s.yaml:3:30: error: factor (1e308) gives inv_freq[1] = 0; every frequency must be finite and in (0, 1024]\n"},
    {"dynamic_factor_huge", "name: a\nhead_dim: 8\nscaling: {type: dynamic, factor: 1e300, original_max_position: 4096}\n",
     "s.yaml:3:34: error: factor (1e300) gives inv_freq[1] = inf at seq_len 4096; every frequency must be finite and in (0, 1024]\n"},
    {"yarn_factor_tiny", "name: a\nhead_dim: 8\nscaling: {type: yarn, factor: 1e-320, original_max_position: 4096}\n",
     "s.yaml:3:31: error: factor (1e-320) gives inv_freq[0] = -nan; every frequency must be finite and in (0, 1024]\n"},
    {"yarn_mscale_negative", "name: a\nhead_dim: 8\nscaling: {type: yarn, factor: 8, original_max_position: 4096, mscale: -100, mscale_all_dim: 1}\n",
     "s.yaml:3:71: error: mscale (-100) gives attention factor -16.38686304205222; it must be finite and > 0 as a float32\n"},
    {"yarn_mscale_all_dim_zero_denominator", "name: a\nhead_dim: 8\nscaling: {type: yarn, factor: 8, original_max_position: 4096, mscale: 1, mscale_all_dim: -4.80898346962988}\n",
     "s.yaml:3:90: error: mscale_all_dim (-4.80898346962988) gives attention factor -2720048421297650; it must be finite and > 0 as a float32\n"},
    {"yarn_attention_factor_subnormal", "name: a\nhead_dim: 8\nscaling: {type: yarn, factor: 8, original_max_position: 4096, attention_factor: 1e-320}\n",
     "s.yaml:3:81: error: attention_factor (1e-320) gives attention factor 1e-320; it must be finite and > 0 as a float32\n"},
    {"yarn_attention_factor_beyond_float", "name: a\nhead_dim: 8\nscaling: {type: yarn, factor: 8, original_max_position: 4096, attention_factor: 1e39}\n",
     "s.yaml:3:81: error: attention_factor (1e39) gives attention factor 1e+39; it must be finite and > 0 as a float32\n"},
    {"longrope_short_factor_tiny", "name: a\nhead_dim: 8\nscaling: {type: longrope, factor: 2, original_max_position: 64, short_factor: [1, 1e-320, 1, 1], long_factor: [1, 1, 1, 1]}\n",
     "s.yaml:3:83: error: scaling.short_factor[1] (1e-320) gives inv_freq[1] = inf at seq_len 64; every frequency must be finite and in (0, 1024]\n"},
    {"longrope_long_factor_tiny", "name: a\nhead_dim: 8\nscaling: {type: longrope, factor: 2, original_max_position: 64, short_factor: [1, 1, 1, 1], long_factor: [1, 1, 1e-320, 1]}\n",
     "s.yaml:3:113: error: scaling.long_factor[2] (1e-320) gives inv_freq[2] = inf at seq_len 65; every frequency must be finite and in (0, 1024]\n"},
    {"longrope_original_one", "name: a\nhead_dim: 8\nscaling: {type: longrope, factor: 2, original_max_position: 1, short_factor: [1, 1, 1, 1], long_factor: [1, 1, 1, 1]}\n",
     "s.yaml:3:61: error: original_max_position (1) must be in 2..4294967296 (2^32, the largest position)\n"},
    {"llama3_factor_tiny", "name: a\nhead_dim: 8\nscaling: {type: llama3, factor: 1e-320, original_max_position: 8192}\n",
     "s.yaml:3:33: error: factor (1e-320) gives inv_freq[3] = inf; every frequency must be finite and in (0, 1024]\n"},
    {"sinusoidal_base_tiny", "name: a\nencoding: sinusoidal\ndim: 8\nbase: 5e-324\n",
     "s.yaml:4:7: error: base (5e-324) gives inv_freq[1] = 6.707394273891462e+80; every frequency must be finite and in (0, 1024]\n"},
    {"xpos_scale_base_tiny", "name: a\nhead_dim: 8\nxpos: {scale_base: 1e-320}\n",
     "s.yaml:3:20: error: scale_base (1e-320) must be >= 1\n"},
    {"several_absurd_values_at_once", "name: a\nhead_dim: 8\nfrequency: {theta: 1e-300}\nscaling: {type: linear, factor: 1e-300}\n",
     "s.yaml:3:20: error: theta (1e-300) gives inv_freq[1] = 1e+75; every frequency must be finite and in (0, 1024]\ns.yaml:4:33: error: factor (1e-300) gives inv_freq[0] = 9.999999999999999e+299; every frequency must be finite and in (0, 1024]\n"},
};

INSTANTIATE_TEST_SUITE_P(All, SpecErrors, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.label); });

TEST(SpecErrorsFormat, PrintsTheSourceLineAndACaret) {
  Result<RopeSpec> r = parse_spec("name: a\nhead_dim: 128\nrotary_dim: 130\n", "spec.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(format(r.errors()),
            "spec.yaml:3:13: error: rotary_dim (130) must be even and in 2..128 (head_dim 128 - rotary_offset 0)\n"
            "  rotary_dim: 130\n"
            "              ^\n");
}

TEST(SpecErrorsFormat, LongLinesAreShownAsAWindowAroundTheColumn) {
  const std::string filler(300, 'x');
  Result<RopeSpec> r = parse_spec("name: a\nhead_dim: 8\npairing: " + filler + "\n", "spec.yaml");
  ASSERT_FALSE(r.ok());
  const std::string text = format(r.errors()[0]);
  const std::string shown = text.substr(text.find('\n') + 3, text.rfind('\n') - text.find('\n') - 3);
  EXPECT_EQ(shown, "pairing: " + std::string(91, 'x') + "...");
  EXPECT_EQ(text.substr(text.rfind('\n')), "\n           ^");
}

TEST(SpecErrorsFormat, MissingFileIsADiagnosticNotACrash) {
  Result<RopeSpec> r = load_spec("/nonexistent/spec.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(format(r.errors()), "/nonexistent/spec.yaml: error: cannot read spec file: No such file or directory\n");
}

}  // namespace
}  // namespace ropegen
