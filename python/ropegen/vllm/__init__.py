"""rope-gen inside vLLM: a general plugin that serves vLLM's RoPE layers with rope-gen kernels.

    pip install ./python[vllm]
    VLLM_PLUGINS=ropegen vllm serve ...        # or python with vllm.LLM(...)

vLLM calls `register()` (entry point `ropegen` in the group
`vllm.general_plugins`) in every process it starts. With rope-gen named in
VLLM_PLUGINS, register() swaps each RoPE layer class of
vllm/model_executor/layers/rotary_embedding that rope-gen serves for a
subclass running rope-gen's kernels (vLLM's CustomOp.register_oot; Phi-3's
LongRoPE, a plain nn.Module that register_oot cannot reach, by the name
get_rope builds it under): the computing kernel from the layer's own
parameters where a spec expresses them, else the table kernel on the layer's
cos/sin cache in float32, else vLLM's own kernel (specs.ROWS says which and
why). It logs at INFO what it swapped, once per process.

VLLM_PLUGINS unset makes vLLM load every installed plugin; rope-gen then swaps
nothing and says so in one INFO line: kernels change only where a user named
rope-gen. ROPEGEN_VLLM_REPORT=FILE appends evidence as JSON lines (report.py).
docs/vllm.md has the class table, accuracy and limits.
"""
import logging
import os

_log = logging.getLogger("vllm.ropegen")
_registered = False

__all__ = ["register"]


def _named_in_vllm_plugins():
    """Whether VLLM_PLUGINS names this plugin (vLLM's parsing: a comma-separated list)."""
    value = os.environ.get("VLLM_PLUGINS")
    return value is not None and "ropegen" in [name.strip() for name in value.split(",")]


def register():
    """vLLM's entry point: swap the RoPE layer classes rope-gen serves (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    if not _named_in_vllm_plugins():
        _log.info("rope-gen's vLLM plugin is installed but not enabled (VLLM_PLUGINS does not name `ropegen`): "
                  "vLLM's RoPE kernels are unchanged")
        return
    from vllm.platforms import current_platform
    if not (current_platform.is_cpu() or current_platform.is_cuda()):
        _log.info("rope-gen: vLLM's %s platform is not one rope-gen's kernels run on (CPU, CUDA): vLLM's RoPE "
                  "kernels are unchanged", current_platform.device_type)
        return
    import vllm.model_executor.layers.rotary_embedding as rotary
    from vllm.model_executor.custom_op import CustomOp

    from .layers import served_class
    from .specs import ROWS
    served, kept = [], []
    for name, row in ROWS.items():
        vllm_cls = getattr(rotary, name, None)
        if vllm_cls is None:
            from vllm.model_executor.layers.rotary_embedding import common
            vllm_cls = getattr(common, name, None)
        if vllm_cls is None:
            kept.append(f"{name} (not in this vLLM)")
        elif row.spec is None and not row.table:
            kept.append(name)
            _log.info("rope-gen: %s keeps vLLM's kernel: %s", name, row.reason)
        elif issubclass(vllm_cls, CustomOp):
            CustomOp.register_oot(served_class(vllm_cls), name=name)
            served.append(name)
        else:
            setattr(rotary, name, served_class(vllm_cls))  # get_rope builds it by this name
            served.append(name)
    _log.info("rope-gen serves vLLM's RoPE layers %s with its kernels (pid %d); vLLM's own: %s",
              ", ".join(served), os.getpid(), ", ".join(kept) or "none")
