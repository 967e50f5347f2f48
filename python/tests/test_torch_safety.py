"""ropegen.torch on what a careless or hostile caller passes: int64 indices
past int32, a half-precision cos/sin cache passed every step, empty tensors
(whose data pointer is null), meta tensors among CPU ones, the in-place ops
under autograd and inference mode, a spec whose layout is not the call's,
positions past 2^32 and an offset beside ids, vLLM's head_size and cache
dtype, spec paths that are FIFOs, directories or huge files; then seeded
random arguments for vLLM's op and the KV append, each call either right or
refused with a ValueError, TypeError or RuntimeError. The kernels compiled
are those of python/tests/test_torch.py's specs but two (vLLM's head_size 16,
neox and gptj)."""
import json
import os
import random

import pytest

torch = pytest.importorskip("torch")
import ropegen  # noqa: E402
import ropegen.torch as rt  # noqa: E402

PLAIN = {"name": "plain", "head_dim": 32, "rotary_dim": 24, "frequency": {"theta": 10000}}
SLOTS = json.dumps({"name": "kv", "head_dim": 8, "layout": "thd", "positions": "explicit",
                    "kv_cache": {"layout": "contiguous"}})
PAGED = json.dumps({"name": "kv", "head_dim": 32, "rotary_dim": 24, "layout": "thd", "positions": "explicit",
                    "kv_cache": {"layout": "paged_nhd", "page_size": 4}})


def qk(b=2, hq=4, hk=2, s=7, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, hq, s, d, generator=g), torch.randn(b, hk, s, d, generator=g)


def positions(b=2, s=7, start=3):
    return (torch.arange(s) + start).repeat(b, 1)


def vllm_cache(max_pos, rot, dtype=torch.float32):
    inv = 1.0 / 10000.0 ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    angle = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv
    return torch.cat([angle.cos(), angle.sin()], -1).to(dtype)


def vllm_reference(pos, x, head_size, cache, is_neox):
    """vLLM's rotation of x [T, H * head_size] by the rows of cache, in float64."""
    x = x.double().reshape(pos.numel(), -1, head_size)
    cos, sin = cache.double()[pos.reshape(-1)].chunk(2, -1)
    cos, sin = cos[:, None], sin[:, None]
    if is_neox:
        a, b = x.chunk(2, -1)
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)


def append_slots(slot_mapping, cache, k=None):
    q = torch.randn(3, 2, 8)
    k = torch.randn(3, 1, 8) if k is None else k
    torch.ops.ropegen.rope_append_kv_cache(SLOTS, q, k, None, None, torch.tensor([0, 1, 2]), cache, None, None, None,
                                           slot_mapping)


# --- index narrowing -------------------------------------------------------

def test_int64_indices_past_int32_are_refused_or_skipped_never_wrapped():
    cache = torch.zeros(8, 1, 8)
    with pytest.raises(ValueError, match=r"slot_mapping\[1\] is 4294967303, outside k_cache's 8 slots"):
        append_slots(torch.tensor([2, 2**32 + 7, 0]), cache)  # narrowed first, it was slot 7
    assert torch.equal(cache, torch.zeros(8, 1, 8))
    append_slots(torch.tensor([2, -2**32 + 5, 0]), cache)  # negative: padding (narrowed first, it was slot 5)
    written = [int(s) for s in range(8) if cache[s].abs().sum() > 0]
    assert written == [0, 2]

    q, k = torch.randn(2, 2, 32), torch.randn(2, 1, 32)
    k_cache = torch.zeros(3, 4, 1, 32)
    pages, starts, requests = torch.tensor([1, 2**32 + 2]), torch.tensor([0, 2]), torch.tensor([0, 0])
    with pytest.raises(ValueError, match=r"kv_indices\[1\] is 4294967298, outside k_cache's 3 pages"):
        torch.ops.ropegen.rope_append_kv_cache(PAGED, q, k, None, requests, torch.tensor([0, 5]), k_cache, None,
                                               pages, starts, None)
    assert torch.equal(k_cache, torch.zeros(3, 4, 1, 32))


# --- engine caches ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_a_half_precision_cos_sin_cache_serves_every_step_and_is_reread_once_written(dtype):
    t, h, hs = 4, 2, 16
    cache = vllm_cache(32, hs, dtype)
    pos = torch.tensor([0, 3, 7, 30])
    x = torch.randn(t, h * hs)

    def step(c):
        q = x.clone()
        torch.ops.ropegen.rotary_embedding(pos, q, None, hs, c, True)
        return q

    first = step(cache)
    assert torch.equal(first, step(cache.float()))  # widening is exact
    for _ in range(3):  # vLLM: the same cache every step
        assert torch.equal(step(cache), first)
    cache.copy_(cache.flip(0))  # written in place: read again
    assert torch.equal(step(cache), step(cache.float()))
    assert not torch.equal(step(cache), first)
    cache[4:8].view(-1)[0] = 0.5  # through a view: the version counter is shared
    assert torch.equal(step(cache), step(cache.float()))


# --- null and empty data ---------------------------------------------------

def test_empty_k_beside_q_rotates_q_and_gives_an_empty_k():
    rope = rt.Rope(PLAIN)
    q, k = qk()
    k0 = torch.empty(2, 0, 7, 32)
    assert k0.data_ptr() == 0  # what made the kernel a bounds query
    want_q, _ = rope(q, k, positions())
    out_q, out_k = rope(q, k0, positions())
    assert out_k.shape == k0.shape and torch.equal(out_q, want_q)
    in_place = q.clone()
    rope.forward_(in_place, k0, positions())
    assert torch.equal(in_place, want_q)
    none_q, none_k = rope(q[:, :, :0], k[:, :, :0], positions(s=0))
    assert none_q.shape == (2, 4, 0, 32) and none_k.shape == (2, 2, 0, 32)


# --- devices ---------------------------------------------------------------

def test_a_meta_tensor_among_cpu_tensors_is_refused_and_all_meta_traces():
    spec = rt.Rope(PLAIN).spec
    q, k = qk()
    with pytest.raises(ValueError, match="k is on meta but q is on cpu: a call's tensors share one device"):
        torch.ops.ropegen.rope(spec, q, k.to("meta"), positions(), "bhsd", 0, None, None)
    with pytest.raises(ValueError, match="k is on cpu but q is on meta"):
        torch.ops.ropegen.rope_(spec, q.to("meta"), k, positions(), "bhsd", 0, None, None)
    with pytest.raises(ValueError, match="cos_sin_cache is on meta"):
        torch.ops.ropegen.rotary_embedding(torch.arange(3), torch.randn(3, 16), None, 16,
                                           vllm_cache(8, 16).to("meta"), True)
    with pytest.raises(ValueError, match="k_cache is on meta"):
        append_slots(torch.tensor([0, 1, 2]), torch.zeros(8, 1, 8, device="meta"))
    out_q, out_k = torch.ops.ropegen.rope(spec, q.to("meta"), k.to("meta"), positions().to("meta"), "bhsd", 0, None,
                                          None)
    assert out_q.device.type == "meta" and out_q.shape == q.shape and out_k.shape == k.shape


# --- autograd and inference tensors ----------------------------------------

def test_in_place_ops_bump_versions_and_refuse_what_native_in_place_ops_refuse():
    spec = rt.Rope(PLAIN).spec
    w = torch.randn(2, 4, 7, 32, requires_grad=True)
    x, k = qk()
    loss = (w * x).sum()  # saves x for backward
    version = x._version
    torch.ops.ropegen.rope_(spec, x, k, positions(), "bhsd", 0, None, None)
    assert x._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()

    leaf = torch.randn(2, 4, 7, 32, requires_grad=True)
    before = leaf.detach().clone()
    with pytest.raises(RuntimeError, match="q requires grad and is rotated in place"):
        torch.ops.ropegen.rope_(spec, leaf, k, positions(), "bhsd", 0, None, None)
    assert torch.equal(leaf.detach(), before)
    with torch.no_grad():  # as native in-place ops: allowed without grad
        torch.ops.ropegen.rope_(spec, leaf, k, positions(), "bhsd", 0, None, None)
    assert not torch.equal(leaf.detach(), before)

    with torch.inference_mode():
        frozen, frozen_k = qk()
        torch.ops.ropegen.rope_(spec, frozen, frozen_k, positions(), "bhsd", 0, None, None)
    with pytest.raises(RuntimeError, match="q is an inference tensor"):
        torch.ops.ropegen.rope_(spec, frozen, k, positions(), "bhsd", 0, None, None)
    with pytest.raises(RuntimeError, match="key requires grad"):
        torch.ops.ropegen.rotary_embedding(torch.arange(3), torch.randn(3, 16), torch.randn(3, 16, requires_grad=True),
                                           16, vllm_cache(8, 16), True)
    with pytest.raises(RuntimeError, match="k_cache is an inference tensor"):
        with torch.inference_mode():
            cache = torch.zeros(8, 1, 8)
        append_slots(torch.tensor([0, 1, 2]), cache)


# --- a spec's own layout -----------------------------------------------------

def test_a_spec_that_fixes_its_layout_refuses_a_call_in_another():
    fixed = rt.Rope(dict(PLAIN, layout="bshd"))
    q, k = qk()
    with pytest.raises(ValueError, match=r"the spec fixes `layout: bshd` but the call's layout is 'bhsd': "
                                         r"pass layout='bshd'"):
        fixed(q, k, positions())  # [B, H, S, D] tensors would have been rotated as [B, S, H, D]
    want_q, want_k = rt.Rope(PLAIN)(q, k, positions())
    out_q, out_k = fixed(q.transpose(1, 2), k.transpose(1, 2), positions(), layout="bshd")
    assert (out_q.transpose(1, 2) - want_q).abs().max() <= 2e-6
    assert (out_k.transpose(1, 2) - want_k).abs().max() <= 2e-6


# --- positions and offset ----------------------------------------------------

def test_positions_past_2_to_the_32_and_an_offset_beside_ids_are_refused():
    rope = rt.Rope(PLAIN)
    q, k = qk()
    far = positions()
    far[1, 3] = 2**32 + 1
    with pytest.raises(ValueError, match=r"position id 4294967297 is out of range: positions must be in 0..2\^32"):
        rope(q, k, far)
    with pytest.raises(ValueError, match=r"offset \(3\) is for implicit positions"):
        rope(q, k, positions(), offset=3)
    far[1, 3] = 2**32  # the last accepted: still a rotation
    out_q, _ = rope(q, k, far)
    assert (out_q[..., :24].norm(dim=-1) - q[..., :24].norm(dim=-1)).abs().max() < 1e-4


# --- vLLM's arguments --------------------------------------------------------

def test_vllm_head_size_and_cache_dtype_are_named():
    pos, query = torch.arange(3), torch.randn(3, 32)
    for head_size in (0, -16):
        with pytest.raises(ValueError, match=rf"head_size \({head_size}\) must be a positive integer"):
            torch.ops.ropegen.rotary_embedding(pos, query, None, head_size, vllm_cache(8, 16), True)
    for dtype in (torch.int64, torch.bool):
        with pytest.raises(TypeError, match=rf"cos_sin_cache has dtype {dtype}: it must be float32, float16 or "):
            torch.ops.ropegen.rotary_embedding(pos, query, None, 16, vllm_cache(8, 16).to(dtype), True)


# --- spec paths --------------------------------------------------------------

def test_spec_paths_that_are_no_regular_file_are_refused_by_name(tmp_path):
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    for spec in (fifo, str(fifo)):
        with pytest.raises(ValueError, match="cannot read spec file: it is a FIFO"):
            ropegen.compile(spec)
    with pytest.raises(ValueError, match="cannot read spec file: it is a directory"):
        rt.Rope(str(tmp_path))
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as f:
        f.truncate(4 << 30)  # sparse: read no further than the 1 MiB limit
    with pytest.raises(ValueError, match=r"spec is larger than 1048576 bytes \(1 MiB\)"):
        ropegen.compile(huge)


# --- random arguments ----------------------------------------------------------

REFUSALS = (ValueError, TypeError, RuntimeError)
IDS = (0, 1, 2, 5, 7, 9, -1, -2**32 + 5, 2**31, 2**32 + 7, 2**63 - 1)


def test_random_arguments_are_right_or_refused():
    """Seeded, bounded (a few hundred calls of small tensors): vLLM's op and the
    KV append with random token counts, shapes, dtypes, devices (meta), ids,
    indices and caches. A call that runs must give vLLM's rotation (or write only
    the slots it names); anything else must be one of the refusals above."""
    rng = random.Random(32)
    hs = 16
    for _ in range(200):
        t = rng.choice((0, 1, 3))
        # int64 ids and neox pairing only: each id width and pairing is a kernel to compile.
        pos = torch.tensor([rng.choice(IDS[:6]) if rng.random() < 0.9 else rng.choice(IDS) for _ in range(t)],
                           dtype=torch.int64)
        heads = rng.choice((1, 2))
        query = torch.randn(t, heads * hs) if rng.random() < 0.8 else torch.randn(t, heads, hs + rng.choice((0, 1)))
        key = rng.choice((None, torch.randn(t, hs), torch.randn(t, 0)))
        cache = vllm_cache(rng.choice((1, 8, 12)), hs, rng.choice((torch.float32, torch.bfloat16, torch.int64)))
        if rng.random() < 0.1:
            cache = cache.to("meta")
        head_size = rng.choice((hs, hs, hs, 0, -hs, 15))
        before = query.clone()
        try:
            torch.ops.ropegen.rotary_embedding(pos, query, key, head_size, cache, True)
        except REFUSALS:
            assert torch.equal(query, before)
        else:
            if t > 0:
                want = vllm_reference(pos, before.reshape(t, -1), hs, cache.float(), True)
                assert (query.double().reshape(want.shape) - want).abs().max() <= 2e-6

        cache = torch.full((8, 1, 8), 7.0)
        slots = torch.tensor([rng.choice(IDS) for _ in range(3)])
        try:
            append_slots(slots, cache)
        except REFUSALS:
            assert torch.equal(cache, torch.full((8, 1, 8), 7.0))
            continue
        named = {int(s) for s in slots if 0 <= s < 8}
        assert {s for s in range(8) if not torch.equal(cache[s], torch.full((1, 8), 7.0))} == named
