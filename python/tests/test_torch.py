"""ropegen.torch: the ops (opcheck), the Rope module against the peers' golden
data in every layout and dtype, autograd (q, k and trainable frequencies),
torch.compile(fullgraph=True) of an HF-style attention block, strided inputs,
in place, and CUDA (skipped without a GPU)."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ropegen  # noqa: E402
import ropegen.torch as rt  # noqa: E402
from torch.library import opcheck  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden", "data")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CUDA tests need a GPU")

# A spec that leaves dtype, layout and positions to the call.
LLAMA = {"name": "t", "head_dim": 64, "frequency": {"theta": 500000},
         "scaling": {"type": "llama3", "factor": 8, "original_max_position": 64, "low_freq_factor": 1,
                     "high_freq_factor": 4}}
PLAIN = {"name": "plain", "head_dim": 32, "rotary_dim": 24, "frequency": {"theta": 10000}}


def reference(x, positions, inv_freq, layout="bhsd", interleaved=False):
    """Float64 RoPE of x (rotary dims first, the rest passed through), written
    here from the papers' formula: independent of rope-gen's lowering."""
    x = x.double()
    if layout == "bshd":
        x = x.transpose(1, 2)
    rot = 2 * inv_freq.shape[0]
    angle = positions.double()[..., None] * inv_freq.double()  # [B, S, rot/2]
    cos, sin = angle.cos()[:, None], angle.sin()[:, None]      # [B, 1, S, rot/2]
    if interleaved:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        ra, rb = a * cos - b * sin, b * cos + a * sin
        rotated = torch.stack([ra, rb], -1).flatten(-2)
    else:
        a, b = x[..., :rot // 2], x[..., rot // 2:rot]
        rotated = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    out = torch.cat([rotated, x[..., rot:]], -1)
    return out.transpose(1, 2) if layout == "bshd" else out


def plain_inv_freq(rotary_dim, theta):
    """theta^(-2i / rotary_dim): partial rotary as GPT-NeoX's rotary_ndims."""
    return 1.0 / theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)


def qk(b=2, hq=4, hk=2, s=7, d=32, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, s, d, generator=g).to(dtype), torch.randn(b, hk, s, d, generator=g).to(dtype))


def positions(b=2, s=7, start=3):
    return (torch.arange(s) + start).repeat(b, 1)


# --- the ops ---------------------------------------------------------------

def test_opcheck_every_op():
    spec = rt.Rope(LLAMA).spec
    q, k = qk(d=64)
    pos = positions()
    cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    thd_q, thd_k = torch.randn(7, 4, 64), torch.randn(7, 2, 64)
    cases = [
        (torch.ops.ropegen.rope.default, (spec, q, k, pos, "bhsd", 0, None, None)),
        (torch.ops.ropegen.rope.default, (spec, q, None, None, "bhsd", 5, None, None)),
        (torch.ops.ropegen.rope.default, (spec, q.requires_grad_(), k.requires_grad_(), pos, "bhsd", 0, None, None)),
        (torch.ops.ropegen.rope.default, (spec, thd_q, thd_k, None, "thd", 0, cu, None)),
        (torch.ops.ropegen.rope_.default, (spec, q.detach().clone(), k.detach().clone(), pos, "bhsd", 0, None, None)),
        (torch.ops.ropegen.rope_backward.default,
         (spec, q.detach(), k.detach(), pos, "bhsd", 0, None, None, None, None)),
    ]
    runtime = json.dumps({"name": "r", "head_dim": 64, "frequency": {"scheme": "runtime"}})
    freqs = torch.rand(32, requires_grad=True)
    cases.append((torch.ops.ropegen.rope.default,
                  (runtime, q.detach().requires_grad_(), k.detach(), pos, "bhsd", 0, None, freqs)))
    for op, args in cases:
        opcheck(op, args)  # schema, fake kernel, autograd registration, aliasing, aot dispatch


def test_out_of_place_outputs_are_new_contiguous_tensors():
    q, k = qk()
    q = q.transpose(1, 2).contiguous().transpose(1, 2)  # HF's [B, H, S, D] view of [B, S, H, D]
    out_q, out_k = rt.Rope(PLAIN)(q, k, positions())
    assert out_q.is_contiguous() and out_k.is_contiguous()
    assert out_q.data_ptr() != q.data_ptr()


# --- exactness against the peers -------------------------------------------

def golden_cases():
    names = []
    for path in sorted(glob.glob(os.path.join(GOLDEN, "hf_*.json"))):
        with open(path) as f:
            case = json.load(f)
        # Rope takes positions as ids or an offset; dynamic scaling's seq_len is not a module argument.
        if "q" in case and "seq_len" not in case and case.get("layout") in ("bhsd", "bshd", "sbhd", "thd"):
            names.append(os.path.basename(path)[:-5])
    return names


@pytest.mark.parametrize("name", golden_cases())
@pytest.mark.parametrize("in_place", [False, True], ids=["out_of_place", "in_place"])
def test_golden_cases_with_call_time_layout(name, in_place):
    """Every HF golden case through Rope with a spec that leaves dtype, layout
    and positions to the call; each layout given at call time."""
    with open(os.path.join(GOLDEN, name + ".json")) as f:
        case = json.load(f)
    spec = "".join(line + "\n" for line in case["spec"].splitlines()
                   if not line.startswith(("layout:", "dtype:", "positions:")))
    rope = rt.Rope(spec)
    q = torch.tensor(case["q"], dtype=torch.float32).reshape(case["q_shape"])
    k = torch.tensor(case["k"], dtype=torch.float32).reshape(case["k_shape"]) if "k" in case else None
    ids = torch.tensor(case["positions"]).reshape(case["positions_shape"]) if "positions" in case else None
    kwargs = {"layout": case["layout"], "offset": case.get("offset", 0)}
    if "cu_seqlens" in case:
        kwargs["cu_seqlens"] = torch.tensor(case["cu_seqlens"], dtype=torch.int32)
    if in_place:
        out_q, out_k = rope.forward_(q.clone(), k.clone() if k is not None else None, ids, **kwargs)
    else:
        out_q, out_k = rope(q, k, ids, **kwargs)
    scale = max(1.0, float(np.abs(case["out_q"]).max()))
    top = int(ids.max()) if ids is not None else case.get("offset", 0) + max(case["q_shape"])
    tol = (4e-6 + 2e-7 * top) * scale
    assert (out_q.flatten() - torch.tensor(case["out_q"])).abs().max() <= tol
    if k is not None:
        assert (out_k.flatten() - torch.tensor(case["out_k"])).abs().max() <= tol


@pytest.mark.parametrize("layout", ["bhsd", "bshd", "sbhd", "thd"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["f32", "bf16", "f16"])
def test_one_spec_serves_every_layout_and_dtype(layout, dtype):
    rope = rt.Rope(PLAIN)
    q, k = qk(dtype=dtype)                      # bhsd [2, 4, 7, 32]
    ids = positions()
    expect_q, expect_k = reference(q, ids, plain_inv_freq(24, 1e4)), reference(k, ids, plain_inv_freq(24, 1e4))
    to = {"bhsd": lambda t: t, "bshd": lambda t: t.transpose(1, 2),
          "sbhd": lambda t: t.permute(2, 0, 1, 3), "thd": lambda t: t.transpose(1, 2).flatten(0, 1)}[layout]
    layout_ids = {"bhsd": ids, "bshd": ids, "sbhd": ids.T, "thd": ids.flatten()}[layout]
    out_q, out_k = rope(to(q), to(k), layout_ids, layout=layout)
    assert out_q.dtype == dtype and out_q.shape == to(q).shape
    tol = {torch.float32: 2e-6, torch.bfloat16: 3e-2, torch.float16: 4e-3}[dtype]
    assert (out_q.double() - to(expect_q)).abs().max() <= tol
    assert (out_k.double() - to(expect_k)).abs().max() <= tol


def test_a_spec_that_fixes_dtype_or_layout_refuses_others():
    fixed = dict(PLAIN, dtype="f32")
    q, _ = qk(dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="q has dtype bfloat16 but the spec's dtype is f32"):
        rt.Rope(fixed)(q)
    with pytest.raises(ValueError, match="layout must be one of bhsd, bshd, sbhd, thd"):
        rt.Rope(PLAIN)(q, layout="hsd")


def test_strided_views_of_a_fused_qkv_buffer():
    """q and k as views of one [B, S, (Hq + 2 Hk) * D] projection: out of place
    allocates dense outputs, in place rotates inside the buffer (v untouched)."""
    b, s, hq, hk, d = 2, 5, 4, 2, 32
    qkv = torch.randn(b, s, (hq + 2 * hk) * d)
    q = qkv[..., :hq * d].view(b, s, hq, d)
    k = qkv[..., hq * d:(hq + hk) * d].view(b, s, hk, d)
    v_before = qkv[..., (hq + hk) * d:].clone()
    ids = positions(b, s)
    rope = rt.Rope(PLAIN)
    out_q, out_k = rope(q, k, ids, layout="bshd")
    assert out_q.is_contiguous()
    inv = plain_inv_freq(24, 1e4)
    assert (out_q.double() - reference(q, ids, inv, "bshd")).abs().max() < 2e-6
    rope.forward_(q, k, ids, layout="bshd")
    assert torch.equal(q, out_q) and torch.equal(k, out_k)
    assert torch.equal(qkv[..., (hq + hk) * d:], v_before)


# --- autograd --------------------------------------------------------------

def test_gradients_of_q_and_k_match_float64_autograd():
    q, k = qk()
    q.requires_grad_(), k.requires_grad_()
    ids = positions()
    out_q, out_k = rt.Rope(PLAIN)(q, k, ids)
    assert out_q.requires_grad and out_k.requires_grad
    w_q, w_k = torch.randn_like(out_q), torch.randn_like(out_k)
    ((out_q * w_q).sum() + (out_k * w_k).sum() + out_q.sum()).backward()  # sum(): an expanded gradient
    inv = plain_inv_freq(24, 1e4)
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    r_q, r_k = reference(q64, ids, inv), reference(k64, ids, inv)
    ((r_q * w_q).sum() + (r_k * w_k).sum() + r_q.sum()).backward()
    assert (q.grad - q64.grad).abs().max() < 2e-6
    assert (k.grad - k64.grad).abs().max() < 2e-6


def test_trainable_runtime_frequencies_get_their_gradient():
    spec = {"name": "r", "head_dim": 32, "frequency": {"scheme": "runtime"}}
    inv = plain_inv_freq(32, 1e4).float()
    rope = rt.Rope(spec, freqs=inv)
    assert isinstance(rope.freqs, torch.nn.Parameter)
    q, k = qk()
    q.requires_grad_()
    ids = positions()
    out_q, out_k = rope(q, k, ids)
    w = torch.randn_like(out_q)
    ((out_q * w).sum() + out_k.square().sum()).backward()
    inv64 = inv.double().requires_grad_()
    q64 = q.detach().double().requires_grad_()
    r_q, r_k = reference(q64, ids, inv64), reference(k, ids, inv64)
    ((r_q * w).sum() + r_k.square().sum()).backward()
    assert (q.grad - q64.grad).abs().max() < 2e-6
    assert ((rope.freqs.grad - inv64.grad).abs() / inv64.grad.abs().clamp_min(1.0)).max() < 1e-4


def test_in_place_under_autograd_keeps_the_graph():
    q0, k0 = qk()
    q0.requires_grad_()
    q = q0 * 1.0                  # a non-leaf, as a projection's output is
    k = k0.clone()
    rope = rt.Rope(PLAIN)
    rope.forward_(q, k, positions())
    q.sum().backward()
    out_q, _ = rope(q0.detach().requires_grad_(), None, positions())
    assert q0.grad is not None and torch.isfinite(q0.grad).all()
    assert torch.equal(q.detach(), out_q.detach())


# --- vLLM's rotary_embedding ---------------------------------------------

def vllm_reference(positions, x, head_size, cache, is_neox, offset=0, inverse=False):
    """vLLM's rotary_embedding in float64: dims [offset, offset + rot_dim) of
    each head rotated by the cache rows [cos | sin] of its token (by -angle when
    inverse), the others passed."""
    t = positions.numel()
    x = x.double().reshape(t, -1, head_size)
    rot = cache.shape[1]
    cos, sin = cache.double()[positions.reshape(-1)].chunk(2, -1)
    cos, sin = cos[:, None], (-sin if inverse else sin)[:, None]
    r = x[..., offset:offset + rot]
    if is_neox:
        a, b = r.chunk(2, -1)
        r = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    else:
        a, b = r[..., 0::2], r[..., 1::2]
        r = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
    return torch.cat([x[..., :offset], r, x[..., offset + rot:]], -1)


def vllm_cache(max_pos, rot, theta=10000.0, dtype=torch.float32):
    inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    angle = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv
    return torch.cat([angle.cos(), angle.sin()], -1).to(dtype)


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_vllm_rotary_embedding_on_fused_qkv_views(is_neox, dtype):
    """vLLM's call: query and key as [T, H * head_size] column slices of one qkv
    projection, rotated in place; v untouched; rot_dim < head_size."""
    t, hq, hk, hs, rot = 11, 4, 2, 64, 48
    g = torch.Generator().manual_seed(1)
    qkv = torch.randn(t, (hq + 2 * hk) * hs, generator=g).to(dtype)
    before = qkv.clone()
    query, key = qkv[:, :hq * hs], qkv[:, hq * hs:(hq + hk) * hs]
    positions = torch.randint(0, 300, (t,), generator=g)
    for cache_dtype in (torch.float32, dtype):
        qkv.copy_(before)
        cache = vllm_cache(300, rot, dtype=cache_dtype)
        torch.ops.ropegen.rotary_embedding(positions, query, key, hs, cache, is_neox)
        tol = 2e-6 if dtype == torch.float32 else 2e-2
        assert (query.double().reshape(t, hq, hs) -
                vllm_reference(positions, before[:, :hq * hs], hs, cache, is_neox)).abs().max() <= tol
        assert (key.double().reshape(t, hk, hs) -
                vllm_reference(positions, before[:, hq * hs:(hq + hk) * hs], hs, cache, is_neox)).abs().max() <= tol
        assert torch.equal(qkv[:, (hq + hk) * hs:], before[:, (hq + hk) * hs:])


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_vllm_rotary_embedding_rope_dim_offset_and_inverse(is_neox, inverse):
    """vLLM's current schema: rope_dim_offset rotates dims [offset, offset +
    rot_dim) (an MLA head's rope tail), inverse by -angle; key may be None; the
    six-argument call is offset 0, forward."""
    t, h, hs, rot, offset = 7, 3, 64, 16, 48
    g = torch.Generator().manual_seed(3)
    cache = vllm_cache(100, rot) * 0.9  # an attention factor, as DeepSeek's YaRN caches carry
    positions = torch.randint(0, 100, (t,), generator=g)
    x = torch.randn(t, h * hs, generator=g)
    for key in (x[:, :hs].clone(), None):
        query = x.clone()
        torch.ops.ropegen.rotary_embedding(positions, query, key, hs, cache, is_neox, offset, inverse)
        assert (query.double().reshape(t, h, hs) -
                vllm_reference(positions, x, hs, cache, is_neox, offset, inverse)).abs().max() <= 2e-6
        if key is not None:
            assert (key.double().reshape(t, 1, hs) -
                    vllm_reference(positions, x[:, :hs], hs, cache, is_neox, offset, inverse)).abs().max() <= 2e-6
    six, eight = x.clone(), x.clone()
    torch.ops.ropegen.rotary_embedding(positions, six, None, hs, cache, is_neox)
    torch.ops.ropegen.rotary_embedding(positions, eight, None, hs, cache, is_neox, 0, False)
    assert torch.equal(six, eight)
    opcheck(torch.ops.ropegen.rotary_embedding.default,
            (positions, x.clone(), None, hs, cache, is_neox, offset, inverse))


def test_vllm_rotary_embedding_shapes_and_errors():
    t, h, hs = 5, 2, 32
    cache = vllm_cache(16, hs)
    positions = torch.arange(t).reshape(1, t)           # [B, S] ids are flattened, as vLLM does
    q3 = torch.randn(t, h, hs)
    expect = vllm_reference(positions, q3, hs, cache, True).float()
    torch.ops.ropegen.rotary_embedding(positions, q3, None, hs, cache, True)
    assert (q3 - expect).abs().max() < 2e-6
    opcheck(torch.ops.ropegen.rotary_embedding.default, (positions.flatten(), torch.randn(t, h * hs), None, hs, cache, True))
    opcheck(torch.ops.ropegen.rotary_embedding.default,
            (positions.flatten(), torch.randn(t, h * hs), torch.randn(t, hs), hs, cache, False))
    with pytest.raises(ValueError, match="head_size"):
        torch.ops.ropegen.rotary_embedding(positions, torch.randn(t, 33), None, hs, cache, True)
    with pytest.raises(ValueError, match="outside cos_sin_cache"):
        torch.ops.ropegen.rotary_embedding(positions + 20, torch.randn(t, h * hs), None, hs, cache, True)


# --- the fused KV-cache append -------------------------------------------

def without_kv_cache(spec):
    """The same rotation without the cache: the kv_cache spec's other keys."""
    return {key: value for key, value in json.loads(spec).items() if key != "kv_cache"}


@pytest.mark.parametrize("layout", ["paged_nhd", "paged_hnd", "contiguous"])
def test_rope_append_kv_cache_writes_the_rotated_k_where_flashinfer_does(layout):
    """The op's cache against a scatter written here from FlashInfer's page.cuh
    formula (page kv_indices[kv_indptr[b] + pos // page_size], entry pos % page_size)
    of the Rope op's rotated k; int64 indices as vLLM keeps them; padding skipped."""
    page = 4
    kv = {"layout": layout} if layout == "contiguous" else {"layout": layout, "page_size": page}
    spec = json.dumps({"name": "kv", "head_dim": 32, "rotary_dim": 24, "layout": "thd", "positions": "explicit",
                       "kv_cache": kv})
    t, hq, hk, dv = 7, 4, 2, 16
    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(t, hq, 32, generator=g), torch.randn(t, hk, 32, generator=g), torch.randn(t, hk, dv, generator=g)
    positions = torch.tensor([0, 1, 2, 3, 4, 0, 1])                  # request 0: 5 tokens, request 1: 2
    batch = torch.tensor([0, 0, 0, 0, 0, 1, -1])                      # the last token is padding
    kv_indices, kv_indptr = torch.tensor([3, 0, 5, 1]), torch.tensor([0, 2, 4])   # request 0: pages 3, 0; 1: 5, 1
    slots = torch.tensor([9, 2, 4, 7, 0, 11, -1])
    pages, sentinel = 6, 7.0
    if layout == "paged_nhd":
        k_cache, v_cache = torch.full((pages, page, hk, 32), sentinel), torch.full((pages, page, hk, dv), sentinel)
    elif layout == "paged_hnd":
        k_cache, v_cache = torch.full((pages, hk, page, 32), sentinel), torch.full((pages, hk, page, dv), sentinel)
    else:
        k_cache, v_cache = torch.full((pages * page, hk, 32), sentinel), torch.full((pages * page, hk, dv), sentinel)
    want_q, want_k = rt.Rope(without_kv_cache(spec))(q, k, positions, layout="thd")
    want_k_cache, want_v_cache = k_cache.clone(), v_cache.clone()
    for i in range(t):
        if layout == "contiguous":
            if slots[i] < 0:
                continue
            want_k_cache[slots[i]], want_v_cache[slots[i]] = want_k[i], v[i]
            continue
        if batch[i] < 0:
            continue
        p = int(positions[i])
        pg, entry = int(kv_indices[kv_indptr[batch[i]] + p // page]), p % page
        if layout == "paged_nhd":
            want_k_cache[pg, entry], want_v_cache[pg, entry] = want_k[i], v[i]
        else:
            want_k_cache[pg, :, entry], want_v_cache[pg, :, entry] = want_k[i], v[i]
    paged = layout != "contiguous"
    torch.ops.ropegen.rope_append_kv_cache(spec, q, k, v, batch if paged else None, positions, k_cache, v_cache,
                                           kv_indices if paged else None, kv_indptr if paged else None,
                                           None if paged else slots)
    assert torch.equal(q, want_q)
    assert torch.equal(k_cache, want_k_cache) and torch.equal(v_cache, want_v_cache)


def test_rope_append_kv_cache_opcheck_and_errors():
    spec = json.dumps({"name": "kv", "head_dim": 8, "layout": "thd", "positions": "explicit",
                       "kv_cache": {"layout": "contiguous"}})
    args = (spec, torch.randn(3, 2, 8), torch.randn(3, 1, 8), None, None, torch.tensor([0, 1, 2]),
            torch.zeros(4, 1, 8), None, None, None, torch.tensor([2, -1, 0]))
    opcheck(torch.ops.ropegen.rope_append_kv_cache.default, args)
    bad = list(args)
    bad[10] = torch.tensor([2, 9, 0])
    with pytest.raises(ValueError, match=r"slot_mapping\[1\] is 9, outside k_cache's 4 slots"):
        torch.ops.ropegen.rope_append_kv_cache(*bad)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("layout", ["paged_hnd", "contiguous"])
def test_rope_append_kv_cache_fp8_matches_torchs_float8_conversion(fmt, layout):
    """fp8 caches as FlashInfer keeps them (torch float8 tensors) and as vLLM
    does (uint8): every appended code is torch's own float8 conversion of
    clamp(x / scale) (vLLM's semantics; NaN kept) of the Rope op's rotated k
    and of v, with saturating, NaN and tiny values; other entries untouched."""
    dtype, fp8_max = {"fp8_e4m3": (torch.float8_e4m3fn, 448.0), "fp8_e5m2": (torch.float8_e5m2, 57344.0)}[fmt]
    page = 4
    kv = {"layout": layout, "dtype": fmt}
    if layout != "contiguous":
        kv["page_size"] = page
    spec = json.dumps({"name": "kv", "head_dim": 16, "layout": "thd", "positions": "explicit", "kv_cache": kv})
    t, hq, hk, dv = 5, 2, 2, 8
    g = torch.Generator().manual_seed(5)
    q, k, v = torch.randn(t, hq, 16, generator=g), torch.randn(t, hk, 16, generator=g), torch.randn(t, hk, dv, generator=g)
    v[0, 0, :4] = torch.tensor([1e9, -1e9, float("nan"), 1e-30])
    k[1, 1, 0] = 1e9
    k_scale, v_scale = 0.37, 3.0
    positions, batch = torch.tensor([0, 1, 2, 0, 1]), torch.tensor([0, 0, 0, 1, 1])
    kv_indices, kv_indptr, slots = torch.tensor([2, 0]), torch.tensor([0, 1, 2]), torch.tensor([6, 1, 3, 0, 5])
    paged = layout != "contiguous"
    shape = (lambda d: (3, hk, page, d)) if paged else (lambda d: (8, hk, d))
    sentinel = 0x5A
    for as_float8 in (False, True):
        k_codes = torch.full(shape(16), sentinel, dtype=torch.uint8)
        v_codes = torch.full(shape(dv), sentinel, dtype=torch.uint8)
        k_cache, v_cache = (k_codes.view(dtype), v_codes.view(dtype)) if as_float8 else (k_codes, v_codes)
        q_in = q.clone()
        torch.ops.ropegen.rope_append_kv_cache(spec, q_in, k, v, batch if paged else None, positions, k_cache, v_cache,
                                               kv_indices if paged else None, kv_indptr if paged else None,
                                               None if paged else slots, k_scale, v_scale)
        _, rotated_k = rt.Rope(without_kv_cache(spec))(q, k, positions, layout="thd")

        def codes(x, scale):
            x = x / torch.tensor(scale, dtype=torch.float32)
            return torch.where(torch.isnan(x), x, x.clamp(-fp8_max, fp8_max)).to(dtype).view(torch.uint8)

        want_k, want_v = torch.full_like(k_codes, sentinel), torch.full_like(v_codes, sentinel)
        for i in range(t):
            if paged:
                p = int(positions[i])
                pg = int(kv_indices[kv_indptr[batch[i]] + p // page])
                want_k[pg, :, p % page], want_v[pg, :, p % page] = codes(rotated_k[i], k_scale), codes(v[i], v_scale)
            else:
                want_k[slots[i]], want_v[slots[i]] = codes(rotated_k[i], k_scale), codes(v[i], v_scale)
        assert torch.equal(k_codes, want_k), as_float8
        assert torch.equal(v_codes, want_v), as_float8


def test_rope_append_kv_cache_cache_positions_place_what_pos_ids_rotate():
    """FlashInfer's fused op rotates by pos_ids and places by positions: here
    positions (rotation) 100.. and cache_positions (placement, int64 as
    FlashInfer's) 0.. of one request's two pages."""
    spec = json.dumps({"name": "kv", "head_dim": 16, "layout": "thd", "positions": "explicit",
                       "kv_cache": {"layout": "paged_nhd", "page_size": 4}})
    g = torch.Generator().manual_seed(9)
    q, k = torch.randn(6, 2, 16, generator=g), torch.randn(6, 1, 16, generator=g)
    rotate_at, placed_at = torch.arange(100, 106), torch.arange(6)
    batch, kv_indices, kv_indptr = torch.zeros(6, dtype=torch.int64), torch.tensor([1, 0]), torch.tensor([0, 2])
    def args():  # fresh q and cache: opcheck may run the op on what it is given
        return (spec, q.clone(), k, None, batch, rotate_at, torch.full((3, 4, 1, 16), 7.0), None, kv_indices,
                kv_indptr, None, None, None, placed_at)
    opcheck(torch.ops.ropegen.rope_append_kv_cache.default, args())
    call = args()
    torch.ops.ropegen.rope_append_kv_cache(*call)
    want_q, want_k = rt.Rope(without_kv_cache(spec))(q, k, rotate_at, layout="thd")
    want_cache = torch.full((3, 4, 1, 16), 7.0)
    for t in range(6):
        want_cache[int(kv_indices[t // 4]), t % 4] = want_k[t]
    assert torch.equal(call[1], want_q)
    assert torch.equal(call[6], want_cache)


def test_rope_append_kv_cache_fp8_opcheck_and_errors():
    spec = json.dumps({"name": "kv", "head_dim": 8, "layout": "thd", "positions": "explicit",
                       "kv_cache": {"layout": "contiguous", "dtype": "fp8_e4m3"}})
    args = (spec, torch.randn(3, 2, 8), torch.randn(3, 1, 8), torch.randn(3, 1, 4), None, torch.tensor([0, 1, 2]),
            torch.zeros(4, 1, 8, dtype=torch.uint8), torch.zeros(4, 1, 4, dtype=torch.uint8), None, None,
            torch.tensor([2, -1, 0]), 0.5, 2.0)
    opcheck(torch.ops.ropegen.rope_append_kv_cache.default, args)
    opcheck(torch.ops.ropegen.rope_append_kv_cache.default, args[:11])  # scales left out: 1
    bad = list(args)
    bad[11] = -1.0
    with pytest.raises(ValueError, match=r"k_scale: error: k_scale \(-1\) must be finite and > 0"):
        torch.ops.ropegen.rope_append_kv_cache(*bad)
    bad = list(args)
    bad[6] = torch.zeros(4, 1, 8).to(torch.float8_e5m2)
    with pytest.raises(ValueError, match="k_cache is torch.float8_e5m2 but the spec's kv_cache dtype is not fp8_e5m2"):
        torch.ops.ropegen.rope_append_kv_cache(*bad)
    f32_spec = json.dumps({"name": "kv", "head_dim": 8, "layout": "thd", "positions": "explicit",
                           "kv_cache": {"layout": "contiguous"}})
    with pytest.raises(ValueError, match="k_scale: error: k_scale is for fp8 KV caches"):
        torch.ops.ropegen.rope_append_kv_cache(f32_spec, args[1], args[2], None, None, args[5], torch.zeros(4, 1, 8),
                                               None, None, None, args[10], 2.0)


# --- torch.compile ---------------------------------------------------------

class Attention(torch.nn.Module):
    """An HF-style attention block: projections, [B, H, S, D] views, RoPE, SDPA."""

    def __init__(self, rope, hidden=128, heads=4, kv_heads=2, head_dim=32):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = torch.nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = torch.nn.Linear(heads * head_dim, hidden, bias=False)
        self.rope = rope

    def forward(self, x, position_ids):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q, k, position_ids)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, -1))


def test_torch_compile_fullgraph_has_no_graph_break_and_matches():
    torch.manual_seed(0)
    block = Attention(rt.Rope(PLAIN))
    x, ids = torch.randn(2, 9, 128), positions(2, 9)
    explained = torch._dynamo.explain(block)(x, ids)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
    compiled = torch.compile(block, fullgraph=True)
    eager_out = block(x, ids)
    compiled_out = compiled(x, ids)
    assert torch.allclose(compiled_out, eager_out, atol=1e-5)
    compiled_out.square().sum().backward()
    grads = [p.grad.clone() for p in block.parameters()]
    block.zero_grad()
    eager_out.square().sum().backward()
    for g, p in zip(grads, block.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-4)


# --- Hugging Face configs, import without torch -----------------------------

def test_rope_from_an_hf_config_takes_the_tensors_dtype_and_layout():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                                      rope_theta=10000.0)
    rope = rt.Rope(config)
    q, k = qk(dtype=torch.bfloat16)
    out_q, out_k = rope(q, k, positions())
    inv = plain_inv_freq(32, 1e4)
    assert (out_q.double() - reference(q, positions(), inv)).abs().max() < 3e-2
    assert out_k.dtype == torch.bfloat16


def test_import_ropegen_works_without_torch():
    code = "import sys; sys.modules['torch'] = None; import ropegen; print(ropegen.compile)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# --- CUDA -----------------------------------------------------------------

@cuda
def test_cuda_tensors_run_on_the_current_stream_and_match_the_host():
    q, k = qk()
    ids = positions()
    rope = rt.Rope(PLAIN)
    host_q, host_k = rope(q, k, ids)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        dev_q, dev_k = rope(q.cuda(), k.cuda(), ids.cuda())
    stream.synchronize()
    assert torch.equal(dev_q.cpu(), host_q) and torch.equal(dev_k.cpu(), host_k)


@cuda
def test_cuda_graph_capture_after_one_warm_up():
    q, k = qk()
    q, k, ids = q.cuda(), k.cuda(), positions().cuda()
    rope = rt.Rope(PLAIN)
    expect, _ = rope(q, k, ids)
    rope.forward_(q.clone(), k.clone(), ids)  # warm-up: module load
    graph = torch.cuda.CUDAGraph()
    q_g, k_g = q.clone(), k.clone()
    with torch.cuda.graph(graph):
        rope.forward_(q_g, k_g, ids)
    q_g.copy_(q), k_g.copy_(k)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(q_g, expect)


@cuda
def test_cuda_vllm_rotary_embedding_on_fused_qkv_views_matches_the_host_and_replays_in_a_graph():
    """vLLM's op on CUDA: column views of one qkv buffer, the same bits as on
    the CPU, and captured into a CUDA graph (cos/sin from the cache: no host
    stage in the call)."""
    t, hq, hk, hs, rot = 64, 4, 2, 64, 64
    g = torch.Generator().manual_seed(2)
    qkv = torch.randn(t, (hq + 2 * hk) * hs, generator=g).to(torch.bfloat16)
    positions = torch.randint(0, 300, (t,), generator=g)
    cache = vllm_cache(300, rot, dtype=torch.float32)
    host = qkv.clone()
    torch.ops.ropegen.rotary_embedding(positions, host[:, :hq * hs], host[:, hq * hs:(hq + hk) * hs], hs, cache, True)
    dev, dev_pos, dev_cache = qkv.cuda(), positions.cuda(), cache.cuda()
    torch.ops.ropegen.rotary_embedding(dev_pos, dev[:, :hq * hs], dev[:, hq * hs:(hq + hk) * hs], hs, dev_cache, True)
    torch.cuda.synchronize()
    assert torch.equal(dev.cpu(), host)
    static = qkv.cuda()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.ops.ropegen.rotary_embedding(dev_pos, static[:, :hq * hs], static[:, hq * hs:(hq + hk) * hs], hs,
                                           dev_cache, True)
    static.copy_(qkv.cuda())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static.cpu(), host)


@cuda
def test_cuda_gradients_match_the_host():
    q, k = qk(dtype=torch.bfloat16)
    ids = positions()
    rope = rt.Rope(LLAMA)
    grads = []
    for device in ("cpu", "cuda"):
        qd, kd = q.to(device).requires_grad_(), k.to(device).requires_grad_()
        oq, ok = rope(qd, kd, ids.to(device))
        (oq.float().square().sum() + ok.float().sum()).backward()
        grads.append((qd.grad.cpu(), kd.grad.cpu()))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
