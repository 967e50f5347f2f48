"""vLLM's rotary_embedding as a rope-gen op (registered by ropegen.torch).

    rotary_embedding(positions, query!, key!, head_size, cos_sin_cache, is_neox,
                     rope_dim_offset=0, inverse=False) -> ()

query [T, Hq * head_size] or [T, Hq, head_size], key likewise (or None),
rotated in place by the cos/sin rows of positions [T] (or [B, S], flattened as
the tokens are) in cos_sin_cache [max_pos, rot_dim] = [cos | sin]; is_neox:
half pairing, else interleaved. Dims [rope_dim_offset, rope_dim_offset +
rot_dim) of each head rotate (MLA's rope tail), the rest pass; inverse rotates
by -angle (the rotation's transpose: the kernels' backward, which DeepSeek-V4
applies to the attention output).
"""
import functools
import json
import weakref

import torch

from .torch import _DTYPES, _impl, _lib, _mutated, _mutating, _one_device, _run

_lib.define("rotary_embedding(Tensor positions, Tensor(a!) query, Tensor(b!)? key, int head_size, "
            "Tensor cos_sin_cache, bool is_neox, int rope_dim_offset=0, bool inverse=False) -> ()")


@functools.lru_cache(maxsize=None)
def _vllm_spec(head_size, rot_dim, is_neox, rope_dim_offset=0):
    return json.dumps({"name": "vllm", "encoding": "rope", "head_dim": head_size, "rotary_dim": rot_dim,
                       "rotary_offset": rope_dim_offset, "pairing": "half" if is_neox else "interleaved",
                       "frequency": {"scheme": "table"}})


def _heads(t, tokens, head_size, name):
    """t as [tokens, heads, head_size] (a view, strides kept)."""
    if t.dim() == 3 and t.shape[0] == tokens and t.shape[2] == head_size:
        return t
    if t.dim() != 2 or t.shape[0] != tokens or t.shape[1] % head_size != 0:
        raise ValueError(f"{name} is {list(t.shape)}: it must be [tokens ({tokens}), heads * head_size ({head_size})]"
                         " or [tokens, heads, head_size]")
    if t.stride(1) != 1:
        raise ValueError(f"{name} must have a dense last dim (stride 1, not {t.stride(1)})")
    return t.view(tokens, t.shape[1] // head_size, head_size)  # splits the dense dim: always a view


# id(cache) -> (weak reference to the cache, its version, its float32 copy).
# Keyed by id, not by the tensor: a tensor's == is elementwise, not identity.
_float_caches = {}


def _forget(key, ref):
    if _float_caches.get(key, (None,))[0] is ref:  # not a newer tensor that took the id
        del _float_caches[key]


def _float32_cache(cache):
    """cos_sin_cache as float32 (the kernels read float32; widening is exact).
    Engines keep theirs in the model dtype and pass the same tensor every call,
    so its conversion is kept until the tensor changes (its version counter,
    bumped by every in-place write to it or to a view of its memory)."""
    if cache.dtype == torch.float32:
        return cache
    key = id(cache)
    kept = _float_caches.get(key)
    if kept is None or kept[0]() is not cache or kept[1] != cache._version:
        kept = (weakref.ref(cache, functools.partial(_forget, key)), cache._version, cache.float())
        _float_caches[key] = kept
    return kept[2]


def _vllm_arguments(positions, query, key, head_size, cos_sin_cache):
    """What the kernels cannot name themselves: head_size and the cache's dtype
    (converted to float32 here, so only float dtypes)."""
    if isinstance(head_size, bool) or head_size <= 0:
        raise ValueError(f"head_size ({head_size}) must be a positive integer")
    if cos_sin_cache.dtype not in _DTYPES:
        raise TypeError(f"cos_sin_cache has dtype {cos_sin_cache.dtype}: it must be float32, float16 or bfloat16 "
                        f"([max_position, rotary_dim], cos then sin)")
    _one_device(query, positions=positions, key=key, cos_sin_cache=cos_sin_cache)


@_impl("rotary_embedding")
def _rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox, rope_dim_offset=0, inverse=False):
    _vllm_arguments(positions, query, key, head_size, cos_sin_cache)
    _mutating(query=query, key=key)
    tokens = positions.reshape(-1)
    q = _heads(query, tokens.shape[0], head_size, "query")
    k = _heads(key, tokens.shape[0], head_size, "key") if key is not None else None
    spec = _vllm_spec(head_size, cos_sin_cache.shape[-1], is_neox, rope_dim_offset)
    _run(spec, q, k, tokens, "thd", 0, None, None, q, k, backward=inverse,
         cos_sin_cache=_float32_cache(cos_sin_cache))
    _mutated(query, key)


@torch.library.register_fake("ropegen::rotary_embedding", lib=_lib)
def _(positions, query, key, head_size, cos_sin_cache, is_neox, rope_dim_offset=0, inverse=False):
    _vllm_arguments(positions, query, key, head_size, cos_sin_cache)
    return None
