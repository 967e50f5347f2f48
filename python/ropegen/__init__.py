"""rope-gen from Python: exact positional-encoding kernels on numpy and torch (CPU) tensors.

    import ropegen
    rope = ropegen.compile("examples/llama3_8b.yaml")   # a path, YAML text or a dict
    q_rot, k_rot = rope(q, k, positions=position_ids)
    rope(q, out_q=q)                                     # in place
    dq, dk = rope.backward(grad_q, grad_k, positions=position_ids)  # dL/dq, dL/dk
    q_rot = ropegen.compile(table_spec)(q, positions=ids, cos_sin_cache=cache)  # `frequency: {scheme: table}`
    q_rot = kv_spec_kernel(q, k, v=v, positions=ids, k_cache=kc, v_cache=vc, kv_indices=pages, kv_indptr=starts,
                           batch_indices=requests)               # `kv_cache`: the fused append, caches updated in place
    y = ropegen.compile("examples/transformer_sinusoidal.yaml")(x)  # x + PE (sinusoidal, learned: table=, alibi: scores)
    inv_freq, attention_factor = ropegen.freqs(spec, seq_len=8192)
    spec = ropegen.from_hf("path/to/model")                # a Hugging Face config.json -> spec text
    info = ropegen.explain(spec)                            # `rope-gen explain --json` as a dict

Kernels are compiled once per spec and kept in memory and on disk
($ROPEGEN_CACHE_DIR, default ~/.cache/rope-gen), so later calls and later
processes skip compilation. Errors are ValueErrors with rope-gen's messages.
"""
import json
import os

from . import _ropegen

__all__ = ["compile", "freqs", "from_hf", "explain", "Kernel", "call_arguments"]


def _spec_text(spec):
    """(text, source name) of a spec given as a dict, a path or YAML text."""
    if isinstance(spec, dict):
        return json.dumps(spec), "<dict>"  # JSON is YAML
    # One line naming something that exists is a path (a directory or a FIFO
    # too: the binding refuses them by name, as the CLI does).
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and "\n" not in spec and os.path.lexists(spec)):
        path = os.fsdecode(os.fspath(spec))
        return _ropegen.read_spec_file(path), path
    if isinstance(spec, str):
        return spec, "<string>"
    raise TypeError("spec must be a path, YAML text or a dict")


def _empty_like(t):
    """A new dense output shaped as t (whose own strides may be a view's: broadcast, reversed)."""
    if hasattr(t, "new_empty"):  # torch
        return t.new_empty(t.shape)
    import numpy
    if isinstance(t, numpy.ndarray):
        return numpy.empty(t.shape, t.dtype)
    return numpy.empty_like(t)  # not a tensor: the binding says so, naming the argument


def _empty_codes_like(t):
    """A new dense uint8 array shaped as t: where fp8 codes go."""
    if hasattr(t, "new_empty"):  # torch
        import torch
        return t.new_empty(t.shape, dtype=torch.uint8)
    import numpy
    return numpy.empty(numpy.shape(t), numpy.uint8)


def _empty_scales_like(t, group):
    """A new dense float32 array shaped as t with its last dim / group: where output_quant's scales go."""
    shape = tuple(t.shape[:-1]) + (t.shape[-1] // group,)
    if hasattr(t, "new_empty"):  # torch
        import torch
        return t.new_empty(shape, dtype=torch.float32)
    import numpy
    return numpy.empty(shape, numpy.float32)


def _summed_gradients(tensors, with_k):
    """{name: what it is the gradient of} for the gradients a backward call sums
    over its rows: d_freqs of freqs, the norm weights' of the weights (k's with
    k); each float32, shaped like what it is the gradient of."""
    of = {"d_freqs": tensors.get("freqs"), "d_q_norm_weight": tensors.get("q_norm_weight"),
          "d_k_norm_weight": tensors.get("k_norm_weight") if with_k else None}
    return {name: t for name, t in of.items() if t is not None}


def _zeros_like_vector(t):
    """float32 zeros shaped as t: where a gradient summed over rows goes."""
    if hasattr(t, "new_zeros"):  # torch
        import torch
        return t.new_zeros(t.shape, dtype=torch.float32)
    import numpy
    return numpy.zeros(t.shape, numpy.float32)


class Kernel:
    """A compiled spec; call it on q (and k) in the spec's layout and dtype, or
    on x (sinusoidal, learned) / attention scores [B, H, Sq, Sk] (alibi)."""

    def __init__(self, spec, target="host"):
        text, source = _spec_text(spec)
        self._kernel = _ropegen.compile(text, source, target)

    @property
    def spec(self):
        """The normalised spec (YAML)."""
        return self._kernel.spec

    @property
    def encoding(self):
        """rope, sinusoidal, learned or alibi."""
        return self._kernel.encoding

    def __call__(self, q, k=None, positions=None, offset=0, seq_len=None, out_q=None, out_k=None, cu_seqlens=None,
                 table=None, freqs=None, out=None, cos_sin_cache=None, *, k_scale=None, v_scale=None, q_scale=None,
                 **tensors):
        """Rope: rotate q (and k); returns out_q, or (out_q, out_k) when k is
        given; pass out_q=q (out_k=k) to rotate in place; freqs: inv_freq for
        `scheme: runtime`; cos_sin_cache: float32 [max_pos, rotary_dim] (row p:
        cos of the pairs at position p, then their sin) for `scheme: table`.
        Specs with `kv_cache` (the fused append): k is rotated into k_cache and
        v [T, Hk, Dv] (optional) copied into v_cache, both updated in place,
        at the entries kv_indices / kv_indptr / batch_indices (paged) or
        slot_mapping (contiguous) give (int32; negative: not appended);
        returns out_q, and out_k only when out_k is passed. fp8 caches
        (`dtype: fp8_e4m3 | fp8_e5m2`) are uint8 arrays of codes of
        x / k_scale (v / v_scale): float32 division, saturated, rounded to
        nearest even (vLLM's); scales default to 1 and are refused for other caches.
        cache_positions (paged, int32 [T]): where each token goes in its
        request's pages when it rotates by other positions (FlashInfer's
        fused op: positions place, pos_ids rotate); default: positions.
        Specs with `qk_norm: {weight: per_head}` take q_norm_weight (and,
        with k, k_norm_weight): [head_dim] in the spec's dtype.
        Specs with `output_dtype: fp8_e4m3 | fp8_e5m2`: out_q (out_k) are
        uint8 arrays of the codes of rotated q / q_scale (k / k_scale; times
        them with `fp8_scale: multiply`), the same rule as fp8 caches'; made
        here when not passed; not in place.
        With `output_quant` (q alone) the codes are of x / each group's scale
        and (out_q, out_scales) is returned (out_scales float32, q's shape
        with head_dim / group last); backward() is the inverse rotation.
        Other encodings: q is x (or the scores), table the learned table;
        returns the result (out=x: in place). Any other argument of the call
        table (`ropegen.call_arguments()`) is passed by its name."""
        tensors.update(positions=positions, cu_seqlens=cu_seqlens, table=table, freqs=freqs,
                       cos_sin_cache=cos_sin_cache)
        return self._run(q, k, out if out is not None else out_q, out_k, offset, seq_len, False, tensors,
                         k_scale=k_scale, v_scale=v_scale, q_scale=q_scale)

    def backward(self, grad_q, grad_k=None, positions=None, offset=0, seq_len=None, out_q=None, out_k=None,
                 cu_seqlens=None, freqs=None, saved_q=None, saved_k=None, cos_sin_cache=None, q_norm_weight=None,
                 k_norm_weight=None, *, q_scale=None, k_scale=None):
        """Rope: the gradients dL/dq (and dL/dk) of upstream gradients dL/d(out_q)
        (and dL/d(out_k)), with the forward call's positions / offset / seq_len
        (and cos_sin_cache with `scheme: table`). With `scheme: runtime` pass the
        forward's freqs and inputs (saved_q, saved_k): dL/d(freqs) is returned last.
        With `qk_norm` pass the forward's inputs and weights: the gradients go
        through the norm, and with weights dL/d(q_norm_weight) (, dL/d(k_norm_weight))
        are returned last (float32, summed over tokens and heads). With `output_dtype`
        fp8 it is the inverse rotation into codes (q_scale, k_scale as forward's)."""
        tensors = dict(positions=positions, cu_seqlens=cu_seqlens, freqs=freqs, saved_q=saved_q, saved_k=saved_k,
                       cos_sin_cache=cos_sin_cache, q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight)
        return self._run(grad_q, grad_k, out_q, out_k, offset, seq_len, True, tensors, k_scale=k_scale,
                         q_scale=q_scale)

    def _run(self, q, k, out_q, out_k, offset, seq_len, backward, tensors, k_scale=None, v_scale=None,
             q_scale=None):
        appending = tensors.get("k_cache") is not None
        new = _empty_codes_like if self._kernel.output_fp8 else _empty_like
        out_q = new(q) if out_q is None else out_q
        group = self._kernel.output_quant_group
        if group and tensors.get("out_scales") is None:
            tensors["out_scales"] = _empty_scales_like(q, group)
        if k is not None and out_k is None and not appending:
            out_k = new(k)
        summed = {name: _zeros_like_vector(of)
                  for name, of in (_summed_gradients(tensors, k is not None) if backward else {}).items()}
        tensors.update(q=q, k=k, out_q=out_q, out_k=out_k, **summed)
        self._kernel({name: t for name, t in tensors.items() if t is not None}, offset, seq_len, backward,
                     k_scale=k_scale, v_scale=v_scale, q_scale=q_scale)
        results = ((out_q,) + ((out_k,) if out_k is not None else ()) + tuple(summed.values())
                   + ((tensors["out_scales"],) if group else ()))
        return results[0] if len(results) == 1 else results


def call_arguments():
    """The call's arguments, one tuple each (name, direction "in" | "out" |
    "inout", dtype rule, kind), from the library's one argument table."""
    return _ropegen.call_arguments()


def compile(spec, target="host"):
    """Compile a spec (path, YAML text or dict) for a target (default: this CPU)."""
    return Kernel(spec, target)


def freqs(spec, seq_len=None):
    """(inv_freq as a float64 numpy array, attention_factor) after scaling."""
    import numpy
    text, source = _spec_text(spec)
    inv_freq, attention_factor = _ropegen.freqs(text, source, seq_len)
    return numpy.asarray(inv_freq, dtype=numpy.float64), attention_factor


def explain(spec, max_pos=None, seq_len=None, kernel=True, precision=True):
    """What `rope-gen explain --json` prints, as a dict: per rotary pair inv_freq
    (after and before scaling), wavelength, regime and axis; the attention factor
    and its source; and the largest errors of cos/sin against float64 over
    positions 0..max_pos of float32 angles, bf16 and f16 tables and (kernel=True)
    rope-gen's own kernel, overall and per power-of-two bin (docs/explain.md);
    precision=False: the frequencies alone ("precision" is None)."""
    text, source = _spec_text(spec)
    return json.loads(_ropegen.explain(text, source, max_pos, seq_len, bool(kernel), bool(precision)))


def from_hf(config, name=None, layer_type=None, pairing=None, vision=False):
    """A spec from a Hugging Face model config, as `rope-gen from-hf` makes it: the normalised
    spec's YAML text, which compile() and freqs() take as it is.

    config: a dict (a loaded config.json), JSON text, or the path of a config.json or of a
    directory holding one (a hub snapshot). name: the spec's name (default: model_type);
    layer_type: for models whose layer types differ in RoPE (e.g. "sliding_attention");
    pairing: "half" or "interleaved", for a model_type rope-gen's table does not know;
    vision: the vision tower's 2D RoPE instead of the text model's.
    Errors are ValueErrors naming the config key."""
    options = (name, layer_type, pairing, bool(vision))
    if isinstance(config, dict):
        return _ropegen.from_hf(json.dumps(config), "<dict>", *options)
    if isinstance(config, os.PathLike) or (isinstance(config, str) and not config.lstrip().startswith("{")):
        return _ropegen.from_hf_file(os.fspath(config), *options)
    if isinstance(config, str):
        return _ropegen.from_hf(config, "<string>", *options)
    raise TypeError("config must be a dict, JSON text or the path of a config.json (or its directory)")
