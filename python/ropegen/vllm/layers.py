"""vLLM's RoPE layers served by rope-gen kernels: for each vLLM class a subclass
that decides, when a layer is built, which kernel runs it (specs.ROWS), and
replaces the forward vLLM dispatches to (native, CPU, CUDA).

Calls are vLLM's: query [T, Hq * D] or [T, Hq, D], key likewise or None,
positions [T] (M-RoPE: [3, T]), rotated in place and returned. The kernels run
through the torch ops of ropegen.torch (fake kernels, no host syncs), so CPU
tensors run on the host kernels and CUDA tensors on the CUDA kernels, on the
current stream.
"""
import functools
import json
import logging
from dataclasses import dataclass
from typing import Optional

import torch

from .. import _ropegen
from .. import torch as _ops  # registers torch.ops.ropegen.*
from .. import _vllm_op
from . import report
from .specs import ROWS, mrope_axes

_log = logging.getLogger("vllm.ropegen")
_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


@dataclass
class Plan:
    kernel: str                        # "computing", "table" or "vllm"
    spec: Optional[str] = None         # the computing kernel's spec (JSON text); positions [T]
    axes_spec: Optional[str] = None    # the same with M-RoPE's axes; positions [T, 3]
    spec_hash: Optional[str] = None
    reason: Optional[str] = None


def _checked(spec, dtype):
    """(spec text, hash) of a spec dict as the op will run it (thd, explicit
    positions, the layer's dtype); rope-gen's ValueError when it refuses it."""
    text = json.dumps(spec)
    return text, _ropegen.compile(text, "<vllm>", "host", _DTYPES[dtype], "thd", True).spec_hash


def _plan(layer, row, dtype):
    if dtype not in _DTYPES:
        return Plan("vllm", reason=f"rope-gen kernels take float32, float16 or bfloat16, not {dtype}")
    why = None
    if row.spec is not None:
        spec = row.spec(layer)
        if spec is None:
            why = "its parameters need several tables (linear scaling with more than one factor)"
        else:
            try:
                text, spec_hash = _checked(spec, dtype)
                axes = mrope_axes(layer) if hasattr(layer, "mrope_section") else None
                axes_text = _checked(dict(spec, axes=axes), dtype)[0] if axes else None
                return Plan("computing", text, axes_text, spec_hash)
            except ValueError as e:
                why = f"rope-gen refused its spec: {e}"
    if row.table:
        # vLLM keeps the cache in the model's dtype; the kernel reads it in float32.
        layer.register_buffer("ropegen_cos_sin_cache", layer._compute_cos_sin_cache().float(), persistent=False)
        return Plan("table", reason=why)
    return Plan("vllm", reason=why or row.reason)


@functools.lru_cache(maxsize=None)
def _tail_spec(spec, head, offset):
    return json.dumps(dict(json.loads(spec), head_dim=head, rotary_offset=offset))


class _Served:
    """What every served class adds to its vLLM class (first in the MRO)."""
    vllm_class = ""
    row = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        dtype = getattr(self, "dtype", None)
        if not isinstance(dtype, torch.dtype):  # Phi-3's LongRoPE keeps only its cache
            dtype = self.long_short_cos_sin_cache.dtype
        self.ropegen = _plan(self, self.row, dtype)
        if self.ropegen.kernel != "computing":
            _log.info("rope-gen: %s uses %s (%s)", self.vllm_class,
                      "rope-gen's table kernel" if self.ropegen.kernel == "table" else "vLLM's own kernel",
                      self.ropegen.reason)
        report.built(self.vllm_class, self.ropegen.kernel, self.ropegen.spec_hash, self.ropegen.reason)

    def forward_native(self, positions, query, key=None, offsets=None, inverse=False):
        return self._ropegen_forward("forward_native", positions, query, key, offsets, inverse)

    def forward_cpu(self, positions, query, key=None, offsets=None, inverse=False):
        return self._ropegen_forward("forward_cpu", positions, query, key, offsets, inverse)

    def forward_cuda(self, positions, query, key=None, offsets=None, inverse=False):
        return self._ropegen_forward("forward_cuda", positions, query, key, offsets, inverse)

    def _ropegen_forward(self, method, positions, query, key, offsets, inverse):
        plan = self.ropegen
        if plan.kernel == "vllm" or (positions.dim() == 2 and plan.axes_spec is None):  # [3, T]: no axes spec
            extra = ({"offsets": offsets} if offsets is not None else {}) | ({"inverse": True} if inverse else {})
            return getattr(super(), method)(positions, query, key, **extra)
        if offsets is not None:
            positions = positions + offsets
        if not torch.compiler.is_compiling():
            report.first_call(self.vllm_class)
        # DeepSeek-V4 rotates the last rotary_dim dims of whatever head it is given.
        head = query.size(-1) if self.row.tail else self.head_size
        offset = head - self.rotary_dim if self.row.tail else 0
        if plan.kernel == "table":
            torch.ops.ropegen.rotary_embedding(positions, query, key, head, self.ropegen_cos_sin_cache,
                                               self._neox(), offset, inverse)
        else:
            self._computing(plan, positions, query, key, head, offset, inverse)
        return query, key

    def _computing(self, plan, positions, query, key, head, offset, inverse):
        spec = plan.spec
        if positions.dim() == 2:  # M-RoPE's [3, T]: the kernel takes [T, 3]
            spec, positions = plan.axes_spec, positions.t().contiguous()
        if self.row.tail:
            spec = _tail_spec(spec, head, offset)
        tokens = positions.shape[0]
        q = _vllm_op._heads(query, tokens, head, "query")
        k = _vllm_op._heads(key, tokens, head, "key") if key is not None else None
        if not inverse:
            torch.ops.ropegen.rope_(spec, q, k, positions, "thd", 0, None, None)
            return
        # By -angle: the rotation's transpose, the kernels' backward.
        dq, dk, *_ = torch.ops.ropegen.rope_backward(spec, q, k, positions, "thd", 0, None, None, None, None)
        q.copy_(dq)
        if k is not None:
            k.copy_(dk)

    def _neox(self):
        return getattr(self, "is_neox_style", True)


class _ServedModule(_Served):
    """For a class that is a plain nn.Module (Phi-3's LongRoPE): vLLM calls forward."""

    def forward(self, positions, query, key=None, offsets=None):
        return self._ropegen_forward("forward", positions, query, key, offsets, False)


def served_class(vllm_cls):
    """The subclass of a vLLM RoPE class that rope-gen's kernels run."""
    from vllm.model_executor.custom_op import CustomOp
    name = vllm_cls.__name__
    mixin = _Served if issubclass(vllm_cls, CustomOp) else _ServedModule
    return type("Ropegen" + name, (mixin, vllm_cls), {"vllm_class": name, "row": ROWS[name],
                                                       "__module__": __name__})
