"""What rope-gen gives each of vLLM's RoPE layer classes: one table, one row a class.

A row's `spec(layer)` builds the computing kernel's spec (exact cos/sin, no
table) from the layer's own parameters; `table` says whether rope-gen's table
kernel (`frequency: {scheme: table}`) can run the layer on its cos/sin cache
kept in float32; `reason` says why vLLM keeps its own kernel for a class
with neither.

Why from the layer rather than through `from_hf`: a vLLM layer holds
parameters vLLM already resolved (theta after NTK, YaRN's attention factor
after its defaults, the LongRoPE factor set picked by max_model_len), and
several differ from Hugging Face's reading of the same config (vLLM's dynamic
NTK is a fixed base change at the cache length, not per call; its DeepSeek
YaRN divides mscales where HF does not; its M-RoPE YaRN ramps over the cache
length). Serving vLLM means serving its math, so each row reads the layer.
Spec keys are rope-gen's (docs/spec.md); frequencies the spec cannot name are
`custom` values, computed here in float64 from the layer's formula.
"""
import math
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class Row:
    spec: Optional[Callable] = None   # layer -> spec dict, or None when no spec expresses the class
    table: bool = False               # its forward is vLLM's rotary_embedding on self.cos_sin_cache
    reason: str = ""                  # why vLLM's own kernel, when neither applies
    tail: bool = False                # rotates the last rotary_dim dims of the call's head (DeepSeek-V4)


def _rope(layer, frequency, scaling=None, rotary_dim=None):
    spec = {"name": "vllm_" + layer.vllm_class.lower(), "encoding": "rope",
            "head_dim": layer.head_size, "rotary_dim": rotary_dim or layer.rotary_dim,
            "pairing": "half" if getattr(layer, "is_neox_style", True) else "interleaved", "frequency": frequency}
    if scaling:
        spec["scaling"] = scaling
    return spec


def _lang(theta):
    return {"scheme": "lang", "theta": float(theta)}


def _custom(values):
    return {"scheme": "custom", "values": [float(v) for v in values]}


def _pairs(layer):
    return range(layer.rotary_dim // 2)


def _plain(layer):
    return _rope(layer, _lang(layer.base))


def _linear(layer):
    # Several factors (one per LoRA adapter) share one cache, picked by
    # position offsets: only the table holds them.
    if len(layer.scaling_factors) != 1:
        return None
    return _rope(layer, _lang(layer.base), {"type": "linear", "factor": float(layer.scaling_factors[0])})


def _ntk(layer):
    # inv_freq_i = (base f)^(-2i/d) / f^(2/d) (fixed NTK), or
    # base^(-2i/d) / exp(ln f / (d/2)^b * (i+1)^b) (mixed, mixed_b = b).
    d, f, b = layer.rotary_dim, layer.scaling_factor, layer.mixed_b
    if b is None:
        return _rope(layer, _custom((layer.base * f) ** (-2 * i / d) / f ** (2 / d) for i in _pairs(layer)))
    a = math.log(f) / (d / 2) ** b
    return _rope(layer, _custom(layer.base ** (-2 * i / d) / math.exp(a * (i + 1) ** b) for i in _pairs(layer)))


def _ntk_exponent(layer):
    return layer.rotary_dim / (layer.rotary_dim - 2)


def _dynamic_ntk(layer):
    # vLLM fixes the base once, at its cache length (HF changes it per call).
    f = layer.scaling_factor
    stretch = f * layer.max_position_embeddings / layer.max_trained_positions - (f - 1)
    return _rope(layer, _lang(layer.base * stretch ** _ntk_exponent(layer)))


def _dynamic_ntk_alpha(layer):
    return _rope(layer, _lang(layer.base * layer.scaling_alpha ** _ntk_exponent(layer)))


def _llama3(layer):
    if layer.low_freq_factor == layer.high_freq_factor:
        # No medium band: wavelengths from original / low on are divided by
        # factor (the spec's llama3 needs high > low).
        cutoff = layer.orig_max_position / layer.low_freq_factor
        inv = [layer.base ** (-2 * i / layer.rotary_dim) for i in _pairs(layer)]
        return _rope(layer, _custom(v if 2 * math.pi / v < cutoff else v / layer.scaling_factor for v in inv))
    return _rope(layer, _lang(layer.base), {
        "type": "llama3", "factor": float(layer.scaling_factor), "low_freq_factor": float(layer.low_freq_factor),
        "high_freq_factor": float(layer.high_freq_factor), "original_max_position": int(layer.orig_max_position)})


def _yarn_scaling(layer):
    # The layer's own attention factor (vLLM's mscale, however it was
    # derived) and its ramp over max_position_embeddings, as its cache uses them.
    return {"type": "yarn", "factor": float(layer.scaling_factor),
            "original_max_position": int(layer.max_position_embeddings),
            "beta_fast": float(layer.beta_fast), "beta_slow": float(layer.beta_slow),
            "truncate": bool(getattr(layer, "truncate", True)), "attention_factor": float(layer.mscale)}


def _yarn(layer):
    return _rope(layer, _lang(layer.base), _yarn_scaling(layer))


def _gemma4(layer):
    # Proportional RoPE: theta^(-2i/head_size) on the first rope_angles pairs,
    # frequency 0 (no rotation) on the rest; every dim in the rotation.
    values = [layer.base ** (-2 * i / layer.head_size) for i in range(layer.rope_angles)]
    return _rope(layer, _custom(values + [0.0] * layer.nope_angles))


def _mrope(layer):
    scaling = _yarn_scaling(layer) if layer.scaling_factor is not None else None
    return _rope(layer, _lang(layer.base), scaling)


def mrope_axes(layer):
    """The axes section of an M-RoPE layer's three-id calls, or None."""
    if not layer.mrope_section:
        return None
    return {"sections": [int(s) for s in layer.mrope_section], "interleaved": bool(layer.mrope_interleaved),
            "per_axis_frequencies": False}


def _long_rope(layer):
    # vLLM picks one factor set per model (long when max_model_len exceeds the
    # original context), with that set's mscale.
    long = layer.use_long_rope
    scale = layer.max_position_embeddings / layer.original_max_position_embeddings
    return _rope(layer, _lang(layer.base), {
        "type": "longrope", "factor": float(max(scale, 1.0)),
        "original_max_position": int(layer.original_max_position_embeddings),
        "short_factor": [float(v) for v in layer.short_factor], "long_factor": [float(v) for v in layer.long_factor],
        "policy": "long" if long else "short",
        "attention_factor": float(layer.long_mscale if long else layer.short_mscale)})


_MRoPE_LAYOUT = ("its pairs are dealt to the (t, h, w) ids by {}, which rope-gen's axes (contiguous sections or "
                 "round robin) do not express")

# vLLM 0.32's vllm/model_executor/layers/rotary_embedding, every class.
ROWS = {
    "RotaryEmbedding": Row(_plain, table=True),
    "LinearScalingRotaryEmbedding": Row(_linear, table=True),
    "NTKScalingRotaryEmbedding": Row(_ntk, table=True),
    "DynamicNTKScalingRotaryEmbedding": Row(_dynamic_ntk, table=True),
    "DynamicNTKAlphaRotaryEmbedding": Row(_dynamic_ntk_alpha, table=True),
    "Llama3RotaryEmbedding": Row(_llama3, table=True),
    "YaRNScalingRotaryEmbedding": Row(_yarn, table=True),
    "DeepseekScalingRotaryEmbedding": Row(_yarn, table=True),
    "DeepseekV4ScalingRotaryEmbedding": Row(_yarn, table=True, tail=True),
    "Gemma4RotaryEmbedding": Row(_gemma4, table=True),
    "MRotaryEmbedding": Row(_mrope, table=True),
    "Phi3LongRoPEScaledRotaryEmbedding": Row(_long_rope),
    "MRotaryEmbeddingInterleaved": Row(reason=_MRoPE_LAYOUT.format("a per-section id list (openPangu)")),
    "BailingMRotaryEmbedding": Row(reason=_MRoPE_LAYOUT.format("alternating h/w pairs and a temporal tail")),
    "Ernie4_5_VLRotaryEmbedding": Row(reason=_MRoPE_LAYOUT.format("interleaved h/w pairs and a temporal tail")),
    "DualChunkRotaryEmbedding": Row(reason="dual-chunk attention rotates q by three position schemes (intra-chunk, "
                                           "successor, inter-chunk) into one wider query; not a RoPE call"),
    "FourierRotaryEmbedding": Row(reason="FoPE's cos and sin are learned mixtures per KV head, not the cos and sin of "
                                         "one angle: no spec or table row expresses them"),
    "Llama4VisionRotaryEmbedding": Row(reason="the vision tower's complex-valued 2-D patch table, applied without "
                                              "positions"),
    "ApplyRotaryEmb": Row(reason="it applies cos/sin its caller computed, with no positions"),
}
