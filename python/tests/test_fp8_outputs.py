"""output_dtype fp8 (RoPE + FP8 codes of q and k in one kernel) and FlashInfer's rope_quantize_fp8 op.

The truth is a float64 rotation written here (sharing nothing with the kernels), divided (specs) or multiplied
(FlashInfer's op) by the scale and converted by torch's own float8 conversion after saturation. A kernel code
may differ from it only where the float64 value is within float32 rounding of two codes' midpoint (checked:
the codes of the value nudged by 1e-6 either way bracket the kernel's)."""
import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ropegen  # noqa: E402
import ropegen.torch as rt  # noqa: E402

FORMATS = {"fp8_e4m3": (torch.float8_e4m3fn, 448.0), "fp8_e5m2": (torch.float8_e5m2, 57344.0)}


def codes(values, fmt):
    """torch's float8 codes of float64 values, saturated first (satfinite), as uint8."""
    dtype, top = FORMATS[fmt]
    return torch.as_tensor(values, dtype=torch.float64).clamp(-top, top).to(torch.float32).to(dtype).view(torch.uint8)


def ordered(c):
    c = c.to(torch.int32)
    return torch.where(c >= 128, -(c - 128), c)


def assert_codes(got, want_values, fmt):
    """got (uint8 codes) equal to the codes of want_values, but where float32 rounding can move a value across a
    rounding boundary (the codes of want * (1 -+ 1e-6) bracket it)."""
    want_values = torch.as_tensor(want_values, dtype=torch.float64)
    got = ordered(got.reshape(-1).view(torch.uint8))
    w = want_values.reshape(-1)
    lo, hi = ordered(codes(w - 1e-6 * w.abs() - 1e-30, fmt)), ordered(codes(w + 1e-6 * w.abs() + 1e-30, fmt))
    bad = (got < torch.minimum(lo, hi)) | (got > torch.maximum(lo, hi))
    assert not bool(bad.any()), f"{int(bad.sum())} of {got.numel()} codes differ, e.g. at {int(bad.nonzero()[0])}"
    exact = int((got == ordered(codes(w, fmt))).sum())
    assert exact >= 0.99 * got.numel()  # bracketing is the exception


def rotate64(x, positions, theta, rotary_dim, offset, half):
    """float64 RoPE of x [..., T, H, D] at positions [T] (lang frequencies), dims [offset, offset + rotary_dim)."""
    x = np.asarray(x, dtype=np.float64).copy()
    pairs = rotary_dim // 2
    inv_freq = theta ** (-np.arange(pairs, dtype=np.float64) * 2 / rotary_dim)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq  # [T, pairs]
    c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    part = x[..., offset:offset + rotary_dim]
    a, b = (part[..., :pairs], part[..., pairs:]) if half else (part[..., 0::2], part[..., 1::2])
    ra, rb = a * c - b * s, b * c + a * s
    if half:
        x[..., offset:offset + rotary_dim] = np.concatenate([ra, rb], -1)
    else:
        x[..., offset:offset + rotary_dim:2], x[..., offset + 1:offset + rotary_dim:2] = ra, rb
    return x


def spec(fmt, half=True, rotary_dim=32, offset=8, dtype="bf16"):
    return dict(name="fp8_out", encoding="rope", head_dim=64, rotary_dim=rotary_dim, rotary_offset=offset,
                pairing="half" if half else "interleaved", layout="thd", dtype=dtype, positions="explicit",
                frequency=dict(theta=10000.0), output_dtype=fmt)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("half", [True, False])
def test_codes_are_the_rotation_divided_by_the_scale(fmt, half):
    gen = torch.Generator().manual_seed(0)
    T, H = 9, 3
    q = (torch.randn(T, H, 64, generator=gen) * 4).bfloat16()
    k = (torch.randn(T, 1, 64, generator=gen) * 4).bfloat16()
    pos = torch.randint(0, 5000, (T,), generator=gen)
    q_scale, k_scale = (0.0123, 3.0) if fmt == "fp8_e4m3" else (1e-4, 0.37)  # e4m3: q saturates often
    out_q, out_k = ropegen.compile(spec(fmt, half))(q, k, pos, q_scale=q_scale, k_scale=k_scale)
    assert out_q.dtype == torch.uint8 and out_q.shape == q.shape
    for got, x, scale in ((out_q, q, q_scale), (out_k, k, k_scale)):
        want = rotate64(x.double().numpy(), pos.numpy(), 10000.0, 32, 8, half) / np.float64(np.float32(scale))
        assert_codes(got, want, fmt)


def test_a_scale_applied_on_the_wrong_side_fails():
    """The codes are of x / scale: with scale 3, x * 3's codes differ almost everywhere."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(4, 2, 64, generator=gen).bfloat16()
    pos = torch.arange(4)
    got = ropegen.compile(spec("fp8_e4m3"))(q, positions=pos, q_scale=3.0)
    rotated = rotate64(q.double().numpy(), pos.numpy(), 10000.0, 32, 8, True)
    assert_codes(got, rotated / 3.0, "fp8_e4m3")
    assert float((got == codes(rotated * 3.0, "fp8_e4m3")).double().mean()) < 0.2


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_saturation_infinities_and_nan(fmt):
    """Past the format's largest value (infinities too) a code saturates; NaN stays NaN (0x7f, x's sign)."""
    q = torch.zeros(1, 1, 64, dtype=torch.float32)
    special = [1e30, -1e30, math.inf, -math.inf, math.nan, -math.nan, 1e-30, 0.0]
    q[0, 0, :len(special)] = torch.tensor(special)  # pass-through dims 0..7: cast, not rotated
    got = ropegen.compile(spec(fmt, dtype="f32"))(q, positions=torch.zeros(1, dtype=torch.int64))[0, 0, :8]
    top = codes([FORMATS[fmt][1]], fmt)[0]
    assert got[:4].tolist() == [int(top), int(top) | 0x80, int(top), int(top) | 0x80]
    value = got[4:6].clone().view(FORMATS[fmt][0]).float()
    assert bool(value.isnan().all()) and got[4] & 0x80 == 0 and got[5] & 0x80 == 0x80
    assert got[6:].tolist() == [0, 0]


def test_refusals_name_the_argument():
    kernel = ropegen.compile(spec("fp8_e4m3"))
    q = torch.randn(2, 2, 64).bfloat16()
    pos = torch.arange(2)
    with pytest.raises(ValueError, match=r"out_q: error: out_q has dtype bfloat16 but uint8"):
        kernel(q, positions=pos, out_q=q)
    with pytest.raises(ValueError, match=r"q_scale: error: q_scale \(-1\) must be finite and > 0: out_q holds"):
        kernel(q, positions=pos, q_scale=-1.0)
    normed = ropegen.compile(dict(spec("fp8_e4m3"), qk_norm=dict(eps=1e-6, weight="none")))
    with pytest.raises(ValueError, match=r"backward: error: a spec with output_dtype fp8_e4m3 and qk_norm has no "
                                         r"backward kernel"):
        normed.backward(q, positions=pos)
    plain = ropegen.compile(dict(spec("fp8_e4m3"), output_dtype="bf16"))
    with pytest.raises(ValueError, match=r"q_scale: error: q_scale is for specs with output_dtype fp8"):
        plain(q, positions=pos, q_scale=2.0)
    with pytest.raises(ValueError, match=r"output_dtype `f16` differs from dtype `bf16`"):
        ropegen.compile(dict(spec("fp8_e4m3"), output_dtype="f16"))


def test_backward_is_the_inverse_rotation_into_codes():
    """backward() of an fp8 spec: x rotated by -angle (DeepSeek-V4's inverse RoPE), then its codes."""
    gen = torch.Generator().manual_seed(9)
    q = torch.randn(6, 2, 64, generator=gen).bfloat16()
    pos = torch.tensor([0, 1, 17, 300, 4000, 9])
    got = ropegen.compile(spec("fp8_e4m3", half=False))(q, positions=pos, q_scale=0.25)
    back = ropegen.compile(spec("fp8_e4m3", half=False)).backward(q, positions=pos)
    assert_codes(back, rotate64(q.double().numpy(), -pos.numpy(), 10000.0, 32, 8, False), "fp8_e4m3")
    assert not torch.equal(got, back)


def test_torch_rope_returns_float8_not_differentiable_and_compiles():
    rope = rt.Rope(spec("fp8_e5m2"))
    q = torch.randn(5, 4, 64, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(5, 2, 64, dtype=torch.bfloat16)
    pos = torch.arange(5)
    out_q, out_k = rope(q, k, pos, layout="thd", q_scale=0.5, k_scale=0.25)
    assert out_q.dtype == out_k.dtype == torch.float8_e5m2 and not out_q.requires_grad
    direct = ropegen.compile(spec("fp8_e5m2"))(q.detach(), k, pos, q_scale=0.5, k_scale=0.25)
    assert torch.equal(out_q.view(torch.uint8), direct[0]) and torch.equal(out_k.view(torch.uint8), direct[1])
    with pytest.raises(ValueError, match="cannot replace q and k in place"):
        rope.forward_(q.detach(), k, pos, layout="thd")
    compiled = torch.compile(lambda q, k, p: rope(q, k, p, layout="thd", q_scale=0.5, k_scale=0.25), fullgraph=True,
                             backend="aot_eager")
    again = compiled(q.detach(), k, pos)
    assert torch.equal(again[0].view(torch.uint8), direct[0])


def flashinfer_truth(x, cos_sin_cache, pos, is_neox, scale, fmt):
    """FlashInfer's rope_quantize_fp8 on the rope part, in float64: rotate by the cache's rows, times scale."""
    cs = cos_sin_cache.double()[pos]  # [T, rope_dim]
    half = cs.shape[-1] // 2
    c, s = cs[:, None, :half], cs[:, None, half:]
    x = x.double()
    a, b = (x[..., :half], x[..., half:]) if is_neox else (x[..., 0::2], x[..., 1::2])
    ra, rb = a * c - b * s, b * c + a * s
    out = torch.cat([ra, rb], -1) if is_neox else torch.stack([ra, rb], -1).flatten(-2)
    return out * np.float64(np.float32(scale))


@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_rope_quantize_fp8_gqa_against_flashinfer_semantics(is_neox, fmt):
    gen = torch.Generator().manual_seed(2)
    T, Hq, Hk, rope_dim, nope_dim = 7, 8, 2, 64, 64
    q_rope, q_nope = torch.randn(T, Hq, rope_dim, generator=gen).half(), torch.randn(T, Hq, nope_dim, generator=gen).half()
    k_rope, k_nope = torch.randn(T, Hk, rope_dim, generator=gen).half(), torch.randn(T, Hk, nope_dim, generator=gen).half()
    angles = torch.arange(100, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(32) / 32.0)
    cache = torch.cat([angles.cos(), angles.sin()], -1).float()
    pos = torch.randint(0, 100, (T,), generator=gen, dtype=torch.int32)
    dtype = FORMATS[fmt][0]
    outs = rt.rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cache, pos, is_neox, quantize_dtype=dtype,
                                quant_scale_q=2.0, quant_scale_kv=0.5)
    assert all(o.dtype == dtype for o in outs)
    assert_codes(outs[0].view(torch.uint8), flashinfer_truth(q_rope, cache, pos.long(), is_neox, 2.0, fmt), fmt)
    assert_codes(outs[1].view(torch.uint8), flashinfer_truth(k_rope, cache, pos.long(), is_neox, 0.5, fmt), fmt)
    # The nope parts: FlashInfer's formula exactly.
    top = FORMATS[fmt][1]
    assert torch.equal(outs[2].view(torch.uint8), (q_nope.float() * 2.0).clamp(-top, top).to(dtype).view(torch.uint8))
    assert torch.equal(outs[3].view(torch.uint8), (k_nope.float() * 0.5).clamp(-top, top).to(dtype).view(torch.uint8))


def test_mla_rope_quantize_fp8_into_slices_of_one_buffer():
    """DeepSeek's MLA: k 2-D, outputs written into [nnz, H, 576] / [nnz, 576] buffers as [nope | rope] slices."""
    gen = torch.Generator().manual_seed(3)
    T, H = 6, 16
    q = torch.randn(T, H, 576, generator=gen).bfloat16()
    k = torch.randn(T, 576, generator=gen).bfloat16()
    angles = torch.arange(64, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(32) / 32.0)
    cache = torch.cat([angles.cos(), angles.sin()], -1).float()
    pos = torch.randint(0, 64, (T,), generator=gen)
    q_out = torch.full((T, H, 576), 7.0).to(torch.float8_e4m3fn)
    k_out = torch.full((T, 576), 7.0).to(torch.float8_e4m3fn)
    rt.mla_rope_quantize_fp8(q[..., 512:], k[..., 512:], q[..., :512], k[..., :512], cache, pos, False,
                             q_rope_out=q_out[..., 512:], k_rope_out=k_out[..., 512:], q_nope_out=q_out[..., :512],
                             k_nope_out=k_out[..., :512])
    assert_codes(q_out[..., 512:].contiguous().view(torch.uint8),
                 flashinfer_truth(q[..., 512:], cache, pos, False, 1.0, "fp8_e4m3"), "fp8_e4m3")
    assert_codes(k_out[..., 512:].contiguous().view(torch.uint8),
                 flashinfer_truth(k[..., 512:].unsqueeze(1), cache, pos, False, 1.0, "fp8_e4m3"), "fp8_e4m3")
    assert torch.equal(q_out[..., :512].view(torch.uint8), q[..., :512].float().to(torch.float8_e4m3fn).view(torch.uint8))


def test_rope_quantize_fp8_opcheck_and_refusals():
    gen = torch.Generator().manual_seed(4)
    q, k = torch.randn(3, 2, 16, generator=gen).bfloat16(), torch.randn(3, 1, 16, generator=gen).bfloat16()
    cache = torch.rand(8, 16)
    pos = torch.arange(3)
    outs = [torch.empty(3, 2, 16, dtype=torch.float8_e4m3fn), torch.empty(3, 1, 16, dtype=torch.float8_e4m3fn)]
    # (opcheck's schema test multiplies the outputs, which float8 tensors cannot: the fake kernel and the
    # autograd registration are checked.)
    torch.library.opcheck(torch.ops.ropegen.rope_quantize_fp8,
                          (q, k, None, None, cache, pos, True, outs[0], outs[1], None, None, 1.0, 1.0),
                          test_utils=("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"))
    with pytest.raises(ValueError, match=r"quant_scale_q \(0\.0\) must be finite and > 0"):
        rt.rope_quantize_fp8(q, k, cos_sin_cache=cache, pos_ids=pos, quant_scale_q=0.0)
    with pytest.raises(ValueError, match="cos_sin_cache is torch.bfloat16; it must be float32"):
        rt.rope_quantize_fp8(q, k, cos_sin_cache=cache.bfloat16(), pos_ids=pos)
    with pytest.raises(ValueError, match="must all be float8_e4m3fn or all float8_e5m2"):
        rt.rope_quantize_fp8(q, k, cos_sin_cache=cache, pos_ids=pos, q_rope_out=outs[0],
                             k_rope_out=torch.empty(3, 1, 16, dtype=torch.float8_e5m2))


def paged_truth(x, cache, pos, is_neox, scale, rope_dim):
    """x [T, H, D] rows: the first rope_dim dims rotated as FlashInfer's, all times scale (float64)."""
    rotated = flashinfer_truth(x[..., :rope_dim], cache, pos, is_neox, scale, None)
    return torch.cat([rotated, x[..., rope_dim:].double() * np.float64(np.float32(scale))], -1)


@pytest.mark.parametrize("layout,nope", [("NHD", 0), ("HND", 32)])
def test_rope_quantize_fp8_append_paged_kv_cache_gqa(layout, nope):
    """q quantized, k rotated and v cast into fp8 pages; rotated by pos_ids, placed by positions; a token of
    request -1 appends nothing; entries no token goes to keep their bytes."""
    gen = torch.Generator().manual_seed(5)
    T, Hq, Hk, rope_dim, page = 5, 4, 2, 32, 4
    D = rope_dim + nope
    q_rope, k_rope = torch.randn(T, Hq, rope_dim, generator=gen).bfloat16(), torch.randn(T, Hk, rope_dim, generator=gen).bfloat16()
    q_nope = torch.randn(T, Hq, nope, generator=gen).bfloat16() if nope else None
    k_nope = torch.randn(T, Hk, nope, generator=gen).bfloat16() if nope else None
    v = torch.randn(T, Hk, D, generator=gen).bfloat16()
    angles = torch.arange(64, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(rope_dim // 2) / (rope_dim / 2))
    cache = torch.cat([angles.cos(), angles.sin()], -1).float()
    pos_ids = torch.tensor([3, 9, 0, 40, 7])
    batch_indices = torch.tensor([0, 0, 1, -1, 1], dtype=torch.int32)
    positions = torch.tensor([0, 1, 0, 0, 5], dtype=torch.int32)  # entries within each request's pages
    kv_indices, kv_indptr = torch.tensor([2, 0, 1], dtype=torch.int32), torch.tensor([0, 1, 3], dtype=torch.int32)
    shape = (3, page, Hk, D) if layout == "NHD" else (3, Hk, page, D)
    k_cache = torch.full(shape, 0x5a, dtype=torch.uint8).view(torch.float8_e4m3fn)
    v_cache = k_cache.clone()
    q_out, q_nope_out = rt.rope_quantize_fp8_append_paged_kv_cache(
        q_rope, k_rope, q_nope, k_nope, v, cache, pos_ids, (k_cache, v_cache), kv_indices, kv_indptr, batch_indices,
        positions, is_neox=True, quant_scale_q=0.5, quant_scale_kv=2.0, page_size=page, kv_layout=layout)
    assert_codes(q_out.view(torch.uint8), flashinfer_truth(q_rope, cache, pos_ids, True, 0.5, None), "fp8_e4m3")
    if nope:
        assert torch.equal(q_nope_out.view(torch.uint8),
                           (q_nope.float() * 0.5).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8))
    k_full = torch.cat([k_rope, k_nope], -1) if nope else k_rope
    want_k = paged_truth(k_full, cache, pos_ids, True, 2.0, rope_dim)
    written = set()
    for t in range(T):
        b = int(batch_indices[t])
        if b < 0:
            continue
        p = int(positions[t])
        pg, entry = int(kv_indices[int(kv_indptr[b]) + p // page]), p % page
        written.add((pg, entry))
        at = (pg, entry) if layout == "NHD" else (pg, slice(None), entry)
        assert_codes(k_cache[at].view(torch.uint8), want_k[t], "fp8_e4m3")
        assert torch.equal(v_cache[at].view(torch.uint8),
                           (v[t].float() * 2.0).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8))
    for pg in range(3):
        for entry in range(page):
            if (pg, entry) not in written:
                at = (pg, entry) if layout == "NHD" else (pg, slice(None), entry)
                assert bool((k_cache[at].view(torch.uint8) == 0x5a).all()) and bool((v_cache[at].view(torch.uint8) == 0x5a).all())


def test_rope_quantize_fp8_append_paged_kv_cache_mla():
    """MLA: k_rope rotated into kpe_cache, k_nope cast into ckv_cache, [pages, page_size, dim] each."""
    gen = torch.Generator().manual_seed(6)
    T, H, page = 3, 8, 2
    q_rope, q_nope = torch.randn(T, H, 64, generator=gen).bfloat16(), torch.randn(T, H, 512, generator=gen).bfloat16()
    k_rope, k_nope = torch.randn(T, 64, generator=gen).bfloat16(), torch.randn(T, 512, generator=gen).bfloat16()
    angles = torch.arange(32, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(32) / 32.0)
    cache = torch.cat([angles.cos(), angles.sin()], -1).float()
    pos = torch.tensor([4, 0, 31])
    ckv = torch.zeros(4, page, 512, dtype=torch.float8_e4m3fn)
    kpe = torch.zeros(4, page, 64, dtype=torch.float8_e4m3fn)
    q_out, q_nope_out = rt.rope_quantize_fp8_append_paged_kv_cache(
        q_rope, k_rope, q_nope, k_nope, None, cache, pos, (ckv, kpe), torch.tensor([3, 1], dtype=torch.int32),
        torch.tensor([0, 2], dtype=torch.int32), torch.zeros(T, dtype=torch.int32), torch.tensor([0, 1, 2], dtype=torch.int32),
        is_neox=False, page_size=page)
    assert_codes(q_out.view(torch.uint8), flashinfer_truth(q_rope, cache, pos, False, 1.0, None), "fp8_e4m3")
    assert torch.equal(q_nope_out.view(torch.uint8), q_nope.float().to(torch.float8_e4m3fn).view(torch.uint8))
    for t, (pg, entry) in enumerate(((3, 0), (3, 1), (1, 0))):
        assert_codes(kpe[pg, entry].view(torch.uint8),
                     flashinfer_truth(k_rope[t:t + 1, None], cache, pos[t:t + 1], False, 1.0, None)[0, 0], "fp8_e4m3")
        assert torch.equal(ckv[pg, entry].view(torch.uint8), k_nope[t].float().to(torch.float8_e4m3fn).view(torch.uint8))
    with pytest.raises(ValueError, match="the caches and the outputs share one fp8 format"):
        rt.rope_quantize_fp8_append_paged_kv_cache(
            q_rope, k_rope, q_nope, k_nope, None, cache, pos, (ckv.view(torch.uint8).view(torch.float8_e5m2), kpe),
            torch.tensor([3, 1], dtype=torch.int32), torch.tensor([0, 2], dtype=torch.int32),
            torch.zeros(T, dtype=torch.int32), torch.tensor([0, 1, 2], dtype=torch.int32), page_size=page)


def inverse_truth(o, cache, pos, nope):
    """DeepSeek-V4's inverse RoPE in float64: interleaved pairs of the last dims rotated by -angle."""
    x = o.double().clone()
    half = cache.shape[-1] // 2
    cs = cache.double()[pos]
    c, s = cs[:, None, :half], cs[:, None, half:]
    even, odd = x[..., nope::2].clone(), x[..., nope + 1::2].clone()
    x[..., nope::2], x[..., nope + 1::2] = even * c + odd * s, odd * c - even * s
    return x


@pytest.mark.parametrize("tma", [False, True])
def test_fused_inv_rope_fp8_quant_matches_vllms_semantics(tma):
    """vLLM's op: codes per 128-dim group of x / scale, scale = 2^ceil(log2(max(absmax, 1e-10) / 448)); o_fp8
    [T, G, d] with strides (d, T d, 1); o_scale [T, G, blocks] float32 token-major (or packed UE8M0 int32)."""
    gen = torch.Generator().manual_seed(7)
    T, G, hpg, nope, rope = 6, 2, 3, 448, 64
    o = (torch.randn(T, G * hpg, nope + rope, generator=gen) * 3).bfloat16()
    o[0, 0, :128] = 0  # a group of zeros: the 1e-10 floor
    o[1, 1, 5] = 1e4  # a group whose scale saturates nothing but is large
    pos = torch.randint(0, 100, (T,), generator=gen)
    angles = torch.arange(100, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(32) / 32.0)
    cache = torch.cat([angles.cos(), angles.sin()], -1).float()
    fp8, scales = rt.fused_inv_rope_fp8_quant(o, pos, cache, G, hpg, tma_aligned_scales=tma)
    d = hpg * (nope + rope)
    assert fp8.dtype == torch.float8_e4m3fn and fp8.shape == (T, G, d) and fp8.stride() == (d, T * d, 1)
    groups = inverse_truth(o, cache, pos, nope).reshape(T, G * hpg, 4, 128)
    absmax = groups.abs().amax(-1).clamp(min=1e-10)
    want_scales = torch.exp2(torch.ceil(torch.log2(absmax * np.float64(np.float32(1 / 448.0)))))
    assert_codes(fp8.view(torch.uint8), (groups / want_scales[..., None]).reshape(T, G, d), "fp8_e4m3")
    if tma:
        assert scales.dtype == torch.int32 and scales.shape == (T, G, hpg) and scales.stride() == (1, hpg * 8, 8)
        exponents = (want_scales.float().view(torch.int32) >> 23) & 0xFF  # [T, H, 4]
        words = (exponents << torch.tensor([0, 8, 16, 24], dtype=torch.int32)).sum(-1, dtype=torch.int32)
        assert torch.equal(scales, words.reshape(T, G, hpg))
    else:
        assert scales.dtype == torch.float32 and scales.shape == (T, G, hpg * 4) and scales.stride() == (1, hpg * 32, 8)
        assert torch.equal(scales.double(), want_scales.reshape(T, G, hpg * 4))
    torch.library.opcheck(torch.ops.ropegen.fused_inv_rope_fp8_quant, (o, pos, cache, G, hpg),
                          test_utils=("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"))
    if tma:  # packed words hold four groups of a head: 2 groups of 256 cannot be packed
        with pytest.raises(ValueError, match="must be a multiple of 4"):
            rt.fused_inv_rope_fp8_quant(o, pos, cache, G, hpg, quant_group_size=256, tma_aligned_scales=True)


def test_output_quant_spec_returns_codes_and_float32_scales():
    """A spec with output_quant (float32 scales, forward): (codes, scales), the scales absmax / max exactly."""
    spec = dict(name="gq", encoding="rope", head_dim=32, rotary_dim=16, layout="thd", dtype="f32",
                positions="explicit", frequency=dict(theta=10000.0), output_dtype="fp8_e5m2",
                output_quant=dict(group=8, scale="float32"))
    gen = torch.Generator().manual_seed(8)
    q = torch.randn(4, 3, 32, generator=gen)
    pos = torch.tensor([0, 7, 100, 3])
    codes, scales = ropegen.compile(spec)(q, positions=pos)
    assert scales.shape == (4, 3, 4) and scales.dtype == torch.float32
    rotated = torch.as_tensor(rotate64(q.numpy(), pos.numpy(), 10000.0, 16, 0, True)).reshape(4, 3, 4, 8)
    want = (rotated.abs().amax(-1).clamp(min=1e-10) * np.float64(np.float32(1 / 57344.0)))
    assert float(((scales.double() - want) / want).abs().max()) < 1e-6
    assert_codes(codes, (rotated / scales.double()[..., None]).reshape(4, 3, 32), "fp8_e5m2")
    with pytest.raises(ValueError, match="output_quant quantizes q alone"):
        ropegen.compile(spec)(q, q[:, :1], positions=pos)


# FlashInfer's own reference functions (flashinfer/trace/templates/rope.py, run by
# tests/golden/make_flashinfer_fp8_golden.py): float32 inputs, where they compute what FlashInfer's kernel does
# (float32 rotation, times the scale, one saturating conversion); scales that are no powers of two.
FLASHINFER_GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden", "data",
                                 "flashinfer", "rope_quantize_fp8.json")


def flashinfer_golden(kind):
    with open(FLASHINFER_GOLDEN) as f:
        return json.load(f)[kind]


def from_bits(case, name):
    return torch.tensor(case[name], dtype=torch.int64).to(torch.int32).view(torch.float32).reshape(
        case["shapes"][name])


def assert_peer_codes(got, want, values, fmt="fp8_e4m3"):
    """The peer's codes exactly, but where float32 rotations (theirs: separate roundings, rope-gen's: its own
    order) can round a value across a code boundary: there got must lie in the bracket of the float64 value."""
    got = got.reshape(-1).view(torch.uint8)
    want = torch.tensor(want, dtype=torch.uint8)
    differ = got != want
    if bool(differ.any()):
        assert_codes(got[differ], torch.as_tensor(values, dtype=torch.float64).reshape(-1)[differ], fmt)
    assert int(differ.sum()) <= max(1, got.numel() // 1000), f"{int(differ.sum())} of {got.numel()} codes differ"


@pytest.mark.parametrize("case", flashinfer_golden("rope_quantize_fp8"), ids=lambda c: c["name"])
def test_rope_quantize_fp8_gives_flashinfers_reference_codes(case):
    q_rope, k_rope, q_nope, k_nope = (from_bits(case, n) for n in ("q_rope", "k_rope", "q_nope", "k_nope"))
    cache, pos = from_bits(case, "cos_sin_cache"), torch.tensor(case["pos_ids"], dtype=torch.int32)
    sq, skv = case["quant_scale_q"], case["quant_scale_kv"]
    outs = rt.rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cache, pos, case["is_neox"], quant_scale_q=sq,
                                quant_scale_kv=skv)
    k3 = lambda t: t if t.dim() == 3 else t.unsqueeze(1)
    truths = [flashinfer_truth(q_rope, cache, pos.long(), case["is_neox"], sq, None),
              flashinfer_truth(k3(k_rope), cache, pos.long(), case["is_neox"], skv, None),
              q_nope.double() * np.float64(np.float32(sq)), k_nope.double() * np.float64(np.float32(skv))]
    for name, got, truth in zip(("q_rope_out", "k_rope_out", "q_nope_out", "k_nope_out"), outs, truths):
        assert_peer_codes(got, case["codes"][name], truth)
    # The scale on the wrong side gives other codes: the golden tells the two rules apart.
    wrong = rt.rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cache, pos, case["is_neox"], quant_scale_q=1 / sq,
                                 quant_scale_kv=1 / skv)
    assert not torch.equal(wrong[0].view(torch.uint8).reshape(-1), torch.tensor(case["codes"]["q_rope_out"],
                                                                                dtype=torch.uint8))


@pytest.mark.parametrize("case", flashinfer_golden("rope_quantize_fp8_append_paged_kv_cache"),
                         ids=lambda c: c["name"])
def test_paged_append_gives_flashinfers_reference_caches(case):
    q_rope, k_rope, v = (from_bits(case, n) for n in ("q_rope", "k_rope", "v"))
    cache = from_bits(case, "cos_sin_cache")
    ints = lambda name: torch.tensor(case[name], dtype=torch.int32)
    k_cache = torch.zeros(case["shapes"]["cache"], dtype=torch.float8_e4m3fn)
    v_cache = torch.zeros(case["shapes"]["cache"], dtype=torch.float8_e4m3fn)
    q_out, _ = rt.rope_quantize_fp8_append_paged_kv_cache(
        q_rope, k_rope, None, None, v, cache, ints("pos_ids"), (k_cache, v_cache), ints("kv_indices"),
        ints("kv_indptr"), ints("batch_indices"), ints("positions"), is_neox=True,
        quant_scale_q=case["quant_scale_q"], quant_scale_kv=case["quant_scale_kv"], page_size=case["page_size"],
        kv_layout=case["kv_layout"])
    pos = ints("pos_ids").long()
    assert_peer_codes(q_out, case["codes"]["q_rope_out"],
                      flashinfer_truth(q_rope, cache, pos, True, case["quant_scale_q"], None))
    # v is cast, not rotated: its codes are the peer's exactly; k's rows are compared code by code (the
    # reference's k values are not stored: a differing code must be one of two neighbours).
    assert torch.equal(v_cache.view(torch.uint8).reshape(-1), torch.tensor(case["codes"]["v_cache"], dtype=torch.uint8))
    got_k = ordered(k_cache.view(torch.uint8).reshape(-1))
    want_k = ordered(torch.tensor(case["codes"]["k_cache"], dtype=torch.uint8))
    assert int((got_k != want_k).sum()) <= 1 and int((got_k - want_k).abs().max()) <= 1


# vLLM's own fused_inv_rope_fp8_quant kernel run by Triton's interpreter (tests/golden/make_vllm_inv_rope_golden.py).
VLLM_GOLDEN = os.path.join(os.path.dirname(FLASHINFER_GOLDEN), "..", "vllm", "fused_inv_rope_fp8_quant.json")


def vllm_golden_cases():
    with open(VLLM_GOLDEN) as f:
        return json.load(f)["cases"]


def bits_as(values, shape, width, dtype):
    return torch.tensor(values, dtype=torch.int64).to(width).view(dtype).reshape(shape)


@pytest.mark.parametrize("case", vllm_golden_cases(), ids=lambda c: c["name"])
def test_fused_inv_rope_fp8_quant_gives_vllms_kernel_outputs(case):
    o = bits_as(case["o_bf16"], case["o_shape"], torch.int16, torch.bfloat16)
    cache = bits_as(case["cos_sin_cache"], case["cache_shape"], torch.int32, torch.float32)
    pos = torch.tensor(case["positions"])
    args = (case["n_groups"], case["heads_per_group"], case["nope_dim"], case["rope_dim"], case["quant_group_size"],
            case["tma_aligned_scales"])
    result, scales = rt.fused_inv_rope_fp8_quant(o, pos, cache, *args, quantize=case["quantize"])
    assert list(result.shape) == case["output_shape"] and list(scales.shape) == case["scales_shape"]
    if not case["quantize"]:  # the rotation alone, rounded to bf16: vLLM's within one bf16 rounding
        want = bits_as(case["rotated_bf16"], case["output_shape"], torch.int16, torch.bfloat16)
        assert result.dtype == torch.bfloat16 and scales.numel() == 0
        differ = result.view(torch.int16) != want.view(torch.int16)
        assert int(differ.sum()) <= max(1, result.numel() // 1000)
        assert torch.allclose(result.float(), want.float(), rtol=2 ** -8, atol=0)
        return
    # Scales: vLLM's exactly (float32 values or packed exponent words).
    if case["tma_aligned_scales"]:
        assert torch.equal(scales.contiguous().reshape(-1), torch.tensor(case["scales"], dtype=torch.int32))
    else:
        want_scales = bits_as(case["scales"], case["scales_shape"], torch.int32, torch.float32)
        assert torch.equal(scales, want_scales)
    # Codes: vLLM's, but where the two float32 rotations round a value across a code boundary (the float64
    # value's bracket holds rope-gen's code there).
    T, G = case["output_shape"][:2]
    per_group, group = case["heads_per_group"], case["quant_group_size"]
    head = case["nope_dim"] + case["rope_dim"]
    values = inverse_truth(o, cache, pos, case["nope_dim"]).reshape(T, G * per_group, head // group, group)
    scale_of = values.abs().amax(-1).clamp(min=1e-10) * np.float64(np.float32(1 / 448.0))
    scale_of = torch.exp2(torch.ceil(torch.log2(scale_of)))
    assert_peer_codes(result.contiguous().view(torch.uint8), case["codes"],
                      (values / scale_of[..., None]).reshape(T, G, -1))
