"""vLLM's fused_qk_norm_rope as a rope-gen op (registered by ropegen.torch).

    fused_qk_norm_rope(qkv!, num_heads_q, num_heads_k, num_heads_v, head_dim, eps,
                       q_weight, k_weight, cos_sin_cache, is_neox, position_ids) -> ()

qkv [T, (Hq + Hk + Hv) * head_dim], each row [Q | K | V]: every head of Q and K
is normalised over its head_dim dims (x * rsqrt(mean(x^2) + eps) * w, w the
[head_dim] weight in qkv's dtype) and its first r dims rotated (r =
cos_sin_cache.shape[1], rows [cos of the r / 2 pairs | their sin] at each
position; is_neox: half pairing, else interleaved); dims from r on come out
normalised, V untouched; in place. Served by a spec kernel with `qk_norm` and
`frequency: {scheme: table}` run on views of qkv, so nothing is copied.
"""
import functools
import json

import torch

from . import _vllm_op
from .torch import _impl, _lib, _run

_lib.define("fused_qk_norm_rope(Tensor(a!) qkv, int num_heads_q, int num_heads_k, int num_heads_v, int head_dim, "
            "float eps, Tensor q_weight, Tensor k_weight, Tensor cos_sin_cache, bool is_neox, "
            "Tensor position_ids) -> ()")


@functools.lru_cache(maxsize=None)
def _spec(head_dim, rotary_dim, is_neox, eps):
    return json.dumps({"name": "vllm_qk_norm", "encoding": "rope", "head_dim": head_dim, "rotary_dim": rotary_dim,
                       "pairing": "half" if is_neox else "interleaved", "frequency": {"scheme": "table"},
                       "qk_norm": {"type": "rms", "eps": eps, "weight": "per_head"}})


@_impl("fused_qk_norm_rope")
def _fused_qk_norm_rope(qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, eps, q_weight, k_weight,
                        cos_sin_cache, is_neox, position_ids):
    width = (num_heads_q + num_heads_k + num_heads_v) * head_dim
    if qkv.dim() != 2 or qkv.shape[1] != width or min(num_heads_q, num_heads_k, num_heads_v, head_dim) < 1:
        raise ValueError(f"qkv: error: qkv is {list(qkv.shape)} but must be [tokens, (num_heads_q + num_heads_k + "
                         f"num_heads_v) * head_dim] = [tokens, {width}] with every count >= 1")
    if qkv.stride(1) != 1:
        raise ValueError(f"qkv: error: qkv must have a dense last dim (stride 1, not {qkv.stride(1)})")
    q_end, k_end = num_heads_q * head_dim, (num_heads_q + num_heads_k) * head_dim
    q = qkv[:, :q_end].unflatten(1, (num_heads_q, head_dim))  # views: [T, H, D] with qkv's row stride
    k = qkv[:, q_end:k_end].unflatten(1, (num_heads_k, head_dim))
    spec = _spec(head_dim, cos_sin_cache.shape[-1], bool(is_neox), float(eps))
    _run(spec, q, k, position_ids.reshape(-1), "thd", 0, None, None, q, k,
         cos_sin_cache=_vllm_op._float32_cache(cos_sin_cache), q_norm_weight=q_weight, k_norm_weight=k_weight)


@torch.library.register_fake("ropegen::fused_qk_norm_rope", lib=_lib)
def _(qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, eps, q_weight, k_weight, cos_sin_cache, is_neox,
      position_ids):
    return None
