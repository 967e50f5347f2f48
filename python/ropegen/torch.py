"""rope-gen kernels as PyTorch ops: autograd, torch.compile without graph breaks.

    import ropegen.torch as rt
    rope = rt.Rope("examples/llama3_8b.yaml")        # a path, YAML text, dict or HF config
    q, k = rope(q, k, position_ids)                   # HF's [B, H, S, D] by default
    q, k = rope(q, k, position_ids, layout="thd", cu_seqlens=cu)
    rope.forward_(q, k, position_ids)                 # in place

    torch.ops.ropegen.rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)  # vLLM's op

The ops (namespace `ropegen`, registered on import):
    rope(spec, q, k, positions, layout, offset, cu_seqlens, freqs,
         q_norm_weight=None, k_norm_weight=None, q_scale=None, k_scale=None) -> (out_q, out_k)
                                                                        (output_dtype fp8: float8 codes)
    rope_(spec, q!, k!, positions, layout, offset, cu_seqlens, freqs,
          q_norm_weight=None, k_norm_weight=None) -> ()                              in place
    rope_backward(spec, grad_q, grad_k, positions, layout, offset, cu_seqlens, freqs,
                  saved_q, saved_k, q_norm_weight=None, k_norm_weight=None)
                  -> (grad_q, grad_k, grad_freqs, grad_q_norm_weight, grad_k_norm_weight)
    rotary_embedding(positions, query!, key!, head_size, cos_sin_cache, is_neox,
                     rope_dim_offset=0, inverse=False) -> ()                          vLLM's
    fused_qk_norm_rope(qkv!, num_heads_q, num_heads_k, num_heads_v, head_dim, eps, q_weight, k_weight,
                       cos_sin_cache, is_neox, position_ids) -> ()   vLLM's (ropegen/_qk_norm_op.py)
    rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, cos_sin_cache, pos_ids, is_neox, q_rope_out!,
                      k_rope_out!, q_nope_out!, k_nope_out!, quant_scale_q, quant_scale_kv) -> ()
                                                 FlashInfer's (ropegen/_fp8_ops.py; wrapper rope_quantize_fp8)
    rope_append_kv_cache(spec, q!, k, v, batch_indices, positions, k_cache!, v_cache!,
                         kv_indices, kv_indptr, slot_mapping, k_scale=None, v_scale=None,
                         cache_positions=None) -> ()
                                                                        the fused append (fp8 caches:
                                                                        uint8 or float8 tensors, codes of x / scale)
`spec` is spec text (YAML); a spec that leaves out `dtype`, `layout` or `positions`
takes the call's (the tensors' dtype, the layout argument, whether positions are
passed), with one compiled kernel per combination. `k` absent: out_k is an empty
tensor. Outputs of the out-of-place op are new contiguous tensors, whatever the
inputs' strides: never refused. Every op has a fake (meta) kernel, so torch.compile(fullgraph=True)
traces through them; `rope` has autograd (`rope_backward`: dL/dq, dL/dk and, for
`scheme: runtime`, dL/d(freqs); with `qk_norm` through the norm, and dL/d(weights)).

Why Python `torch.library.custom_op` rather than a C++ TORCH_LIBRARY: the
kernels already take torch tensors through DLPack without a copy, so a C++
registration would only save Python's dispatch (a few microseconds a call,
measured by `bench/torch_bench.py`) at the price of building against one
torch's C++ ABI; `python -m ropegen.torch` would then break with every
torch release.
"""
import functools
import threading

import torch
from torch.utils.dlpack import to_dlpack as _to_dlpack

from . import _ropegen, _spec_text, _summed_gradients, from_hf

__all__ = ["Rope", "kernel", "rope_quantize_fp8", "mla_rope_quantize_fp8", "rope_quantize_fp8_append_paged_kv_cache",
           "fused_inv_rope_fp8_quant"]

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
# fp8 codes (caches, output_dtype fp8) as torch keeps them; the kernels take uint8 views of the same memory.
_FP8_DTYPES = {getattr(torch, name): spec_name for name, spec_name in
               (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2")) if hasattr(torch, name)}
_FP8_TORCH = {spec_name: dtype for dtype, spec_name in _FP8_DTYPES.items()}
_LAYOUTS = ("bhsd", "bshd", "sbhd", "thd")

_kernels = {}
_kernels_lock = threading.Lock()


def kernel(spec, dtype, layout, explicit_positions, device="cpu"):
    """The compiled kernel of spec text for a call's dtype (torch), layout, way
    of passing positions and device type ("cpu", "cuda"); compiled once per
    combination (host kernels also cached on disk). CUDA tensors run where they
    are, on the current stream (no copies; runtime/README.md)."""
    key = (spec, dtype, layout, explicit_positions, device)
    found = _kernels.get(key)
    if found is None:
        _check_layout(layout)
        if dtype not in _DTYPES:
            raise ValueError(f"rope-gen kernels take float32, float16 or bfloat16 tensors, not {dtype}")
        with _kernels_lock:
            found = _kernels.get(key)
            if found is None:
                target = {"cpu": "host", "cuda": "cuda"}.get(device)
                if target is None:
                    raise ValueError(f"rope-gen kernels take CPU or CUDA tensors, not {device} ones")
                found = _ropegen.compile(spec, "<spec>", target, _DTYPES[dtype], layout, explicit_positions)
                # Any 4-D shape fits every 4-D layout: a spec's own layout must be the call's.
                if found.encoding == "rope" and found.layout != layout:
                    raise ValueError(f"the spec fixes `layout: {found.layout}` but the call's layout is {layout!r}: "
                                     f"pass layout={found.layout!r}, or leave layout out of the spec")
                _kernels[key] = found
    return found


def _check_layout(layout):
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(_LAYOUTS)}, not {layout!r}")


def _dl(t):
    """A DLPack capsule of t, or None. torch's C exporter, not __dlpack__: a
    decode-sized call passes five tensors, and __dlpack__'s Python wrapper cost
    1.8 us each (to_dlpack: 0.2 us; bench/torch_bench.py)."""
    return None if t is None else _to_dlpack(t.detach() if t.requires_grad else t)


def _run(spec, q, k, positions, layout, offset, cu_seqlens, freqs, out_q, out_k, backward=False, saved_q=None,
         saved_k=None, d_freqs=None, k_scale=None, v_scale=None, q_scale=None, **tensors):
    """The one call of a kernel from this module; `tensors`: the call's other
    tensor arguments by name (cos_sin_cache, v, k_cache, kv_indices, ...);
    q_scale, k_scale, v_scale: fp8 codes' scales (None: not given). float8
    outputs go as uint8 views."""
    device = q.device.type
    run = kernel(spec, q.dtype, layout, positions is not None, device)
    stream = 0
    if device == "cuda":
        # The call runs on PyTorch's current stream of q's device, ordered with
        # the ops around it; device calls take int32 sequence starts (their
        # values are not read on the host).
        stream = torch.cuda.current_stream(q.device).cuda_stream
    tensors.update(q=q, k=k, positions=positions, out_q=out_q, out_k=out_k, cu_seqlens=cu_seqlens, freqs=freqs,
                   saved_q=saved_q, saved_k=saved_k, d_freqs=d_freqs)
    if device != "cpu":
        for name in _DEVICE_INT32:
            tensors[name] = _device_int32(tensors.get(name))
    for name in ("out_q", "out_k"):
        if tensors[name] is not None and tensors[name].dtype in _FP8_DTYPES:
            tensors[name] = tensors[name].view(torch.uint8)
    run({name: _dl(t) for name, t in tensors.items() if t is not None}, offset, None, backward, k_scale=k_scale,
        v_scale=v_scale, q_scale=q_scale, stream=stream)


# What device calls' kernels read as int32 (their values are never read on
# the host: call/README.md).
_DEVICE_INT32 = ("cu_seqlens", "kv_indices", "kv_indptr", "batch_indices", "slot_mapping", "cache_positions")


def _device_int32(t):
    """A device call's int64 index tensor as int32, saturated rather than
    wrapped: an index past int32 stays past every cache (the kernels clamp it)
    instead of becoming another entry's; negatives stay negative (not appended)."""
    if t is None or t.dtype != torch.int64:
        return t
    return t.clamp(-1, 2**31 - 1).int()


def _one_device(q, **tensors):
    """Fake kernels run for meta tensors, and the dispatcher picks them when
    any argument is one: a call whose tensors are on several devices is refused
    as the real kernels refuse it."""
    for name, t in tensors.items():
        if t is not None and t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}: a call's tensors share one device")


def _mutating(**tensors):
    """What native in-place ops refuse: mutating a leaf that requires grad
    (with grad enabled) or an inference tensor outside inference mode."""
    for name, t in tensors.items():
        if t is None:
            continue
        if t.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(f"{name} requires grad and is rotated in place, which autograd cannot follow: use "
                               f"the out-of-place op (ropegen::rope, Rope.forward) or torch.no_grad()")
        if t.is_inference() and not torch.is_inference_mode_enabled():
            raise RuntimeError(f"{name} is an inference tensor: it can be updated in place only inside "
                               f"torch.inference_mode()")


def _mutated(*tensors):
    """Bumps the version counters of the tensors an op wrote, as native
    in-place ops do: a tensor saved for backward and then rotated makes that
    backward raise instead of using the rotated values."""
    for t in tensors:
        if t is not None and not t.is_inference():
            torch.autograd.graph.increment_version(t)


def _new(t):
    """A contiguous output shaped as t, whatever t's strides: the fake kernel
    must predict the real one's strides, and under Inductor an input's strides
    at trace time need not be those at run time."""
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


def _no_k(q):
    return q.new_empty(0)


# Schemas first (the contract), then the kernels behind them: real ones for the
# devices, fake ones for tracing, autograd for the out-of-place rope.
_lib = torch.library.Library("ropegen", "DEF")
_NORM_WEIGHTS = "Tensor? q_norm_weight=None, Tensor? k_norm_weight=None"
_lib.define("rope(str spec, Tensor q, Tensor? k, Tensor? positions, str layout, int offset, Tensor? cu_seqlens, "
            f"Tensor? freqs, {_NORM_WEIGHTS}, float? q_scale=None, float? k_scale=None) -> (Tensor, Tensor)")
_lib.define("rope_(str spec, Tensor(a!) q, Tensor(b!)? k, Tensor? positions, str layout, int offset, "
            f"Tensor? cu_seqlens, Tensor? freqs, {_NORM_WEIGHTS}) -> ()")
_lib.define("rope_backward(str spec, Tensor grad_q, Tensor? grad_k, Tensor? positions, str layout, int offset, "
            f"Tensor? cu_seqlens, Tensor? freqs, Tensor? saved_q, Tensor? saved_k, {_NORM_WEIGHTS}) "
            "-> (Tensor, Tensor, Tensor, Tensor, Tensor)")
_lib.define("rope_append_kv_cache(str spec, Tensor(a!) q, Tensor k, Tensor? v, Tensor? batch_indices, "
            "Tensor positions, Tensor(b!) k_cache, Tensor(c!)? v_cache, Tensor? kv_indices, Tensor? kv_indptr, "
            "Tensor? slot_mapping, float? k_scale=None, float? v_scale=None, Tensor? cache_positions=None) -> ()")


def _impl(name):
    """Registers f as the op's kernel on every device (the library says which
    devices it can run on)."""
    def register(f):
        for device in ("CPU", "CUDA"):
            _lib.impl(name, f, device)
        return f
    return register


@functools.lru_cache(maxsize=None)
def _spec_fields(spec):
    """The normalised spec's top-level scalar fields ({"output_dtype": "fp8_e4m3", ...})."""
    compiled = _ropegen.compile(spec, "<spec>", "host", None, None, True)
    return dict(line.split(": ", 1) for line in compiled.spec.splitlines() if line[:1].isalpha() and ": " in line)


def _new_output(spec, t):
    """_new(t), or with `output_dtype: fp8_*` a float8 tensor for the codes."""
    fp8 = _FP8_TORCH.get(_spec_fields(spec).get("output_dtype"))
    return _new(t) if fp8 is None else torch.empty(t.shape, dtype=fp8, device=t.device)


@_impl("rope")
def _rope(spec, q, k, positions, layout, offset, cu_seqlens, freqs, q_norm_weight=None, k_norm_weight=None,
          q_scale=None, k_scale=None):
    out_q = _new_output(spec, q)
    out_k = _new_output(spec, k) if k is not None else None
    _run(spec, q, k, positions, layout, offset, cu_seqlens, freqs, out_q, out_k, q_norm_weight=q_norm_weight,
         k_norm_weight=k_norm_weight, q_scale=q_scale, k_scale=k_scale)
    return out_q, (out_k if out_k is not None else _no_k(q))


@torch.library.register_fake("ropegen::rope", lib=_lib)
def _(spec, q, k, positions, layout, offset, cu_seqlens, freqs, q_norm_weight=None, k_norm_weight=None, q_scale=None,
      k_scale=None):
    _one_device(q, k=k, positions=positions, cu_seqlens=cu_seqlens, freqs=freqs, q_norm_weight=q_norm_weight,
                k_norm_weight=k_norm_weight)
    return _new_output(spec, q), (_new_output(spec, k) if k is not None else _no_k(q))


@_impl("rope_")
def _rope_(spec, q, k, positions, layout, offset, cu_seqlens, freqs, q_norm_weight=None, k_norm_weight=None):
    _mutating(q=q, k=k)
    _run(spec, q, k, positions, layout, offset, cu_seqlens, freqs, q, k, q_norm_weight=q_norm_weight,
         k_norm_weight=k_norm_weight)
    _mutated(q, k)


@torch.library.register_fake("ropegen::rope_", lib=_lib)
def _(spec, q, k, positions, layout, offset, cu_seqlens, freqs, q_norm_weight=None, k_norm_weight=None):
    _one_device(q, k=k, positions=positions, cu_seqlens=cu_seqlens, freqs=freqs, q_norm_weight=q_norm_weight,
                k_norm_weight=k_norm_weight)
    return None


def _backward_gradients(grad_q, grad_k, freqs, q_norm_weight, k_norm_weight, make):
    """The summed gradients of a backward call (ropegen._summed_gradients), each
    made by make(like, float32), by name."""
    of = _summed_gradients(dict(freqs=freqs, q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight),
                           grad_k is not None)
    return {name: make(like, dtype=torch.float32) for name, like in of.items()}


def _with_summed(grad_q, dq, dk, summed):
    """(dq, dk, d_freqs, d_q_norm_weight, d_k_norm_weight), the absent ones empty."""
    return (dq, dk if dk is not None else _no_k(grad_q)) + tuple(
        summed.get(name, _no_k(grad_q)) for name in ("d_freqs", "d_q_norm_weight", "d_k_norm_weight"))


@_impl("rope_backward")
def _rope_backward(spec, grad_q, grad_k, positions, layout, offset, cu_seqlens, freqs, saved_q, saved_k,
                   q_norm_weight=None, k_norm_weight=None):
    dq = _new(grad_q)
    dk = _new(grad_k) if grad_k is not None else None
    summed = _backward_gradients(grad_q, grad_k, freqs, q_norm_weight, k_norm_weight, torch.zeros_like)
    _run(spec, grad_q, grad_k, positions, layout, offset, cu_seqlens, freqs, dq, dk, True, saved_q, saved_k,
         q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight, **summed)
    return _with_summed(grad_q, dq, dk, summed)


@torch.library.register_fake("ropegen::rope_backward", lib=_lib)
def _(spec, grad_q, grad_k, positions, layout, offset, cu_seqlens, freqs, saved_q, saved_k, q_norm_weight=None,
      k_norm_weight=None):
    _one_device(grad_q, grad_k=grad_k, positions=positions, cu_seqlens=cu_seqlens, freqs=freqs, saved_q=saved_q,
                saved_k=saved_k, q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight)
    summed = _backward_gradients(grad_q, grad_k, freqs, q_norm_weight, k_norm_weight, torch.empty_like)
    return _with_summed(grad_q, _new(grad_q), _new(grad_k) if grad_k is not None else None, summed)


@functools.lru_cache(maxsize=None)
def _has_qk_norm(spec):
    compiled = _ropegen.compile(spec, "<spec>", "host", None, None, True)
    return any(line.startswith("qk_norm:") for line in compiled.spec.splitlines())


def _setup_context(ctx, inputs, output):
    spec, q, k, positions, layout, offset, cu_seqlens, freqs, q_norm_weight, k_norm_weight = inputs[:10]
    if "output_dtype" in _spec_fields(spec):  # fp8 codes: no gradient flows through them
        ctx.mark_non_differentiable(*output)
    ctx.spec, ctx.layout, ctx.offset, ctx.with_k = spec, layout, offset, k is not None
    # dL/d(freqs) and the norm's gradient need the forward's inputs; dL/dq
    # and dL/dk of a plain rope only the rotation.
    ctx.freqs_grad = freqs is not None and freqs.requires_grad
    saved = (q, k) if ctx.freqs_grad or _has_qk_norm(spec) else (None, None)
    ctx.save_for_backward(positions, cu_seqlens, freqs, *saved, q_norm_weight, k_norm_weight)


def _dense_last(t):
    """t, or a copy when its last dim is not dense (the kernels need stride 1
    there): the gradient of a sum() arrives expanded, with stride 0."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _backward(ctx, grad_q, grad_k):
    positions, cu_seqlens, freqs, saved_q, saved_k, q_norm_weight, k_norm_weight = ctx.saved_tensors
    dq, dk, d_freqs, d_wq, d_wk = torch.ops.ropegen.rope_backward(
        ctx.spec, _dense_last(grad_q), _dense_last(grad_k) if ctx.with_k else None, positions, ctx.layout, ctx.offset,
        cu_seqlens, freqs, saved_q, saved_k, q_norm_weight, k_norm_weight)
    # The weights' gradients in their own dtype (summed in float32).
    weights = tuple(g.to(w.dtype) if w is not None and g.numel() else None
                    for g, w in ((d_wq, q_norm_weight), (d_wk, k_norm_weight)))
    grads = (None, dq, dk if ctx.with_k else None, None, None, None, None, d_freqs if ctx.freqs_grad else None)
    return (grads + weights + (None, None))[:len(ctx.needs_input_grad)]  # (q_scale, k_scale)


torch.library.register_autograd("ropegen::rope", _backward, setup_context=_setup_context, lib=_lib)


# The fused RoPE + KV-cache append of a spec with a `kv_cache` section, in
# FlashInfer's argument order (append_paged_kv_cache: k, v, batch_indices,
# positions, the cache, kv_indices, kv_indptr), q first and rotated in place;
# cache_positions (paged) place tokens that rotate by other positions (the
# fused rope_quantize_fp8_append_paged_kv_cache's `positions` vs `pos_ids`);
# contiguous caches take vLLM's slot_mapping instead of the page table. Index
# tensors may be int64 (vLLM's): host calls pass them as they are
# (prepare_call checks every index, then narrows).


# fp8 caches (spec kv_cache dtype fp8_e4m3 | fp8_e5m2) hold uint8 codes of
# x / k_scale (v / v_scale), vLLM's fp8 KV cache; FlashInfer keeps them as
# torch.float8_e4m3fn / float8_e5m2 tensors, passed here as uint8 views of the
# same memory once their format is checked against the spec's.
def _fp8_codes(cache, name, kv_cache_dtype):
    if cache is None or cache.dtype not in _FP8_DTYPES:
        return cache
    wanted = _FP8_DTYPES[cache.dtype]
    if kv_cache_dtype != wanted:
        raise ValueError(f"{name}: error: {name} is {cache.dtype} but the spec's kv_cache dtype is not {wanted}: "
                         f"pass a cache of the spec's format (or its uint8 view)")
    return cache.view(torch.uint8)


@_impl("rope_append_kv_cache")
def _rope_append_kv_cache(spec, q, k, v, batch_indices, positions, k_cache, v_cache, kv_indices, kv_indptr,
                          slot_mapping, k_scale=None, v_scale=None, cache_positions=None):
    _mutating(q=q, k_cache=k_cache, v_cache=v_cache)
    kv_dtype = kernel(spec, q.dtype, "thd", True, q.device.type).kv_cache_dtype
    _run(spec, q, k, positions, "thd", 0, None, None, q, None, k_scale=k_scale, v_scale=v_scale, v=v,
         k_cache=_fp8_codes(k_cache, "k_cache", kv_dtype), v_cache=_fp8_codes(v_cache, "v_cache", kv_dtype),
         kv_indices=kv_indices, kv_indptr=kv_indptr, batch_indices=batch_indices, slot_mapping=slot_mapping,
         cache_positions=cache_positions)
    _mutated(q, k_cache, v_cache)


@torch.library.register_fake("ropegen::rope_append_kv_cache", lib=_lib)
def _(spec, q, k, v, batch_indices, positions, k_cache, v_cache, kv_indices, kv_indptr, slot_mapping, k_scale=None,
      v_scale=None, cache_positions=None):
    _one_device(q, k=k, v=v, batch_indices=batch_indices, positions=positions, k_cache=k_cache, v_cache=v_cache,
                kv_indices=kv_indices, kv_indptr=kv_indptr, slot_mapping=slot_mapping, cache_positions=cache_positions)
    return None


def _spec_of(spec):
    """Spec text from a path, YAML text, dict or Hugging Face config. An HF
    config's spec leaves dtype, layout and positions to the call (from_hf
    writes every key; these three are the tensors')."""
    if hasattr(spec, "to_dict") and hasattr(spec, "model_type"):  # transformers' PretrainedConfig
        spec = from_hf(spec.to_dict())
        return "".join(line for line in spec.splitlines(keepends=True)
                       if not line.startswith(("dtype:", "layout:", "positions:")))
    text, _ = _spec_text(spec)
    return text


class Rope(torch.nn.Module):
    """A rope spec as a module: forward(q, k=None, position_ids=None, *, layout="bhsd",
    offset=0, cu_seqlens=None) -> (q_rot, k_rot), differentiable in q, k and (for
    `scheme: runtime`) the trainable `freqs` parameter; backward(...) (same arguments)
    rotates by minus the angle.

    spec: a path, YAML text, dict, or a Hugging Face config (through from_hf).
    Layouts: "bhsd" (HF's [B, H, S, D]), "bshd", "sbhd", "thd" (packed tokens
    with cu_seqlens). position_ids: int32/int64 in the layout's token dims
    ([B, S], [S, B] for sbhd, [T] for thd) or [S], with a trailing [n_axes] for
    multi-axis specs; absent: positions offset, offset + 1, ... A spec that leaves
    out dtype or layout takes the tensors'; one that fixes them refuses others.

    qk_norm specs with `weight: per_head`: q_norm_weight and k_norm_weight
    ([head_dim], the tensors' dtype), given at construction (held as trainable
    parameters) or with each call (overriding them); differentiable in them too.

    Specs with `output_dtype: fp8_e4m3 | fp8_e5m2`: forward returns float8
    tensors (float8_e4m3fn, float8_e5m2) of the codes of rotated q / q_scale
    and k / k_scale (default 1; fp8_satfinite of the float32 quotient; the
    product with `fp8_scale: multiply`), not
    differentiable; forward_ is refused (q and k keep their dtype).
    """

    def __init__(self, spec, freqs=None, *, q_norm_weight=None, k_norm_weight=None):
        super().__init__()
        self.spec = _spec_of(spec)
        # Checked as a call with ids would see it (multi-axis specs need explicit ids).
        compiled = _ropegen.compile(self.spec, "<spec>", "host", None, None, True)
        if compiled.encoding != "rope":
            raise ValueError(f"Rope needs a rope spec, not {compiled.encoding}")
        # A spec that reads pairs one way and writes them another (DeepSeek's
        # interleaved in, half out) cannot rotate in place: forward_ copies back.
        fields = _spec_fields(self.spec)
        self._in_place = fields.get("pairing") == fields.get("output_pairing")
        self._fp8 = fields.get("output_dtype")  # fp8 codes out: forward only, out of place
        # scheme: runtime: the inverse frequencies, trainable.
        self.freqs = torch.nn.Parameter(torch.as_tensor(freqs, dtype=torch.float32)) if freqs is not None else None
        trainable = lambda w: torch.nn.Parameter(torch.as_tensor(w)) if w is not None else None
        self.q_norm_weight, self.k_norm_weight = trainable(q_norm_weight), trainable(k_norm_weight)

    def _weights(self, q_norm_weight, k_norm_weight):
        return (q_norm_weight if q_norm_weight is not None else self.q_norm_weight,
                k_norm_weight if k_norm_weight is not None else self.k_norm_weight)

    def forward(self, q, k=None, position_ids=None, *, layout="bhsd", offset=0, cu_seqlens=None, q_norm_weight=None,
                k_norm_weight=None, q_scale=None, k_scale=None):
        wq, wk = self._weights(q_norm_weight, k_norm_weight)
        out_q, out_k = torch.ops.ropegen.rope(self.spec, q, k, position_ids, layout, offset, cu_seqlens, self.freqs,
                                              wq, wk if k is not None else None, q_scale,
                                              k_scale if k is not None else None)
        return out_q, (out_k if k is not None else None)

    def forward_(self, q, k=None, position_ids=None, *, layout="bhsd", offset=0, cu_seqlens=None, q_norm_weight=None,
                 k_norm_weight=None):
        """In place: q (and k) rotated where they are; returns them. Under autograd
        (an input, freqs or a norm weight that needs a gradient), and for specs
        whose output pairing differs from the input's, the rotation is computed
        out of place and copied back, so the graph stays correct."""
        if self._fp8:
            raise ValueError(f"this spec's output_dtype is {self._fp8}: its codes cannot replace q and k in place; "
                             "use forward (out of place)")
        wq, wk = self._weights(q_norm_weight, k_norm_weight)
        tracked = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, self.freqs, wq, wk))
        if tracked or not self._in_place:
            out_q, out_k = self.forward(q, k, position_ids, layout=layout, offset=offset, cu_seqlens=cu_seqlens,
                                        q_norm_weight=wq, k_norm_weight=wk)
            q.copy_(out_q)
            if k is not None:
                k.copy_(out_k)
        else:
            torch.ops.ropegen.rope_(self.spec, q, k, position_ids, layout, offset, cu_seqlens, self.freqs, wq,
                                    wk if k is not None else None)
        return q, k

    def backward(self, q, k=None, position_ids=None, *, layout="bhsd", offset=0, cu_seqlens=None):
        """The rotation by minus the angle, forward's inverse (and its gradient): q (and k) rotated back. DeepSeek-V4
        applies it to its attention output (HF's apply function with (cos, -sin)). Not itself differentiable."""
        out_q, out_k, *_ = torch.ops.ropegen.rope_backward(self.spec, q, k, position_ids, layout, offset, cu_seqlens,
                                                           self.freqs, None, None)
        return out_q, (out_k if k is not None else None)

    def extra_repr(self):
        return self.spec.splitlines()[0] if self.spec else ""


from . import _vllm_op, _qk_norm_op  # noqa: E402,F401  (register rotary_embedding, fused_qk_norm_rope on _lib)
from ._fp8_ops import (  # noqa: E402  (registers the FlashInfer and vLLM FP8 ops)
    fused_inv_rope_fp8_quant, mla_rope_quantize_fp8, rope_quantize_fp8, rope_quantize_fp8_append_paged_kv_cache)
