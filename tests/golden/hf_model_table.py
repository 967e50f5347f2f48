#!/usr/bin/env python3
"""The model table `rope-gen from-hf` reads, generated from the installed transformers, plus one golden case per
model type.

For every model_type of transformers' CONFIG_MAPPING whose modeling file has a rotary-embedding class, the script
*executes* HF's own code (nothing is parsed from source text):
  * the config class instantiated with its defaults gives the defaults of every key from-hf reads (head_dim,
    hidden_size, heads, rope parameters per layer type, partial rotary, layer types, NoPE layers);
  * the config class instantiated with 4.x-style kwargs (rope_scaling, rope_theta, rope_local_base_freq) tells which
    layer type each of those keys feeds;
  * the model's rotary module and apply function, run on unit vectors, give the pairing numerically: which output
    dims each input dim reaches (half: i <-> i + rd/2; interleaved: 2i <-> 2i+1; DeepSeek-V3: in (2i, 2i+1), out
    (i, i + rd/2)); dims that reach only themselves pass through (partial rotary).
A model type whose code does not fit (no standard forward, an apply function of another signature, a pattern the
spec cannot express) is kept in the table with `refused` and the reason; from-hf then exits 2 naming it.

Outputs (from the repository root):
  hf/hf_models.json                      the table (transformers and torch versions inside); the build embeds it
  tests/golden/data/hf_models/<t>.json   per model type: a tiny config of that model (real RoPE keys and defaults),
                                          q, explicit position ids up to several thousand, HF's float32 output and a
                                          float64 rerun of the same code, and the tolerance
Usage:
  python3 tests/golden/hf_model_table.py --venv      # in tests/golden/.venv (make_golden.py's), regenerate
  python3 tests/golden/hf_model_table.py --check     # regenerate in memory; exit 1 when the files differ
"""

import argparse
import contextlib
import copy
import importlib
import inspect
import json
import math
import os
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TABLE = ROOT / "hf" / "hf_models.json"
GOLDEN = HERE / "data" / "hf_models"
sys.path.insert(0, str(HERE))
from hf_table_configs import (  # noqa: E402
    DEFAULT_KEYS, config_dict, head_dim_follows_hidden_size, head_of, jsonable, layer_config, layer_head_dims,
    layer_key_feeds, layer_type_defaults, legacy_feeds, mla, mrope, nope_layers, readable, real_configs, realistic,
    rope_dim_of, splits_flat_rope_parameters, text_config, text_config_path, tiny, with_text_config,
    without_mrope_section)

POSITIONS = [0, 1, 7, 255, 1023, 4095, 6000, 8191]  # past 4096: scaled types' long branch with the tiny configs


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


class Hf:
    def __init__(self):
        import torch
        import transformers
        from transformers.models.auto import configuration_auto
        self.torch = torch
        self.tf = transformers
        self.auto = configuration_auto

    def model_types(self):
        return sorted(self.auto.CONFIG_MAPPING_NAMES)

    def config_class(self, model_type):
        return self.auto.CONFIG_MAPPING[model_type]

    def modeling(self, model_type):
        name = self.auto.model_type_to_module_name(model_type)
        return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


@contextlib.contextmanager
def float64_sticks(torch):
    """`.float()` and float32 tensor factories give float64 inside: HF's own code, rerun in float64."""
    orig_float = torch.Tensor.float
    orig_to = torch.Tensor.to
    orig_arange = torch.arange

    def as_double(self, *a, **k):
        return self.double()

    def to(self, *a, **k):
        a = tuple(torch.float64 if x is torch.float32 else x for x in a)
        if k.get("dtype") is torch.float32:
            k["dtype"] = torch.float64
        return orig_to(self, *a, **k)

    def arange(*a, **k):
        if k.get("dtype") is torch.float32:
            k["dtype"] = torch.float64
        return orig_arange(*a, **k)

    torch.Tensor.float, torch.Tensor.to, torch.arange = as_double, to, arange
    old_default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.Tensor.float, torch.Tensor.to, torch.arange = orig_float, orig_to, orig_arange
        torch.set_default_dtype(old_default)


def rotary_class(mod, cfg_cls):
    """The text rotary class of a modeling module: a *RotaryEmbedding class that is not a vision one."""
    names = [n for n, c in vars(mod).items()
             if inspect.isclass(c) and n.endswith("RotaryEmbedding") and c.__module__ == mod.__name__
             and "Vision" not in n and "Audio" not in n]
    if not names:
        return None
    prefix = cfg_cls.__name__.replace("Config", "")
    names.sort(key=lambda n: (not n.startswith(prefix), "Text" not in n, len(n)))
    return getattr(mod, names[0])


def rotary_of(mod, cfg):
    """The rotary class, or a stand-in that calls the model's own table functions (GPT-J, RoFormer). GPT-J's
    GPTJRotaryEmbedding (transformers 5.24) looks (sin, cos) up in the same table, sized max_position_embeddings:
    the stand-in builds it for the positions tested."""
    if hasattr(mod, "create_sinusoidal_positions"):
        return SinusoidalTable(mod)
    rot_cls = rotary_class(mod, type(cfg))
    if rot_cls is None and hasattr(mod, "RoFormerSinusoidalPositionalEmbedding"):
        rot_cls = RoFormerTable(mod)
    return rot_cls


def apply_function(mod, cfg):
    if hasattr(mod, "RoFormerSelfAttention"):
        return "RoFormerSelfAttention.apply_rotary_position_embeddings"
    if getattr(cfg, "rope_interleave", False) and hasattr(mod, "apply_rotary_pos_emb_interleave"):
        return "apply_rotary_pos_emb_interleave"
    # the last: the interleaving function alone (LongCat-Flash, Mistral Large 4), whatever rope_interleave says
    for name in ("apply_rotary_pos_emb", "apply_rotary_emb", "apply_rotary_pos_emb_interleave"):
        if callable(getattr(mod, name, None)):
            return name
    return None


def rope_interleave_selects(mod):
    """Whether the attention picks the interleaving apply function by `rope_interleave` (DeepSeek-V3: both are in
    its modeling file)."""
    return all(callable(getattr(mod, n, None)) for n in ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave"))


class SinusoidalTable:
    """GPT-J / CodeGen (no rotary class): create_sinusoidal_positions(n, rotary_dim) = [sin | cos] rows, looked up
    by position; apply_rotary_pos_emb(q[..., :rd] as [B,S,H,rd], sin, cos); the rest of the head passes."""
    __name__ = "create_sinusoidal_positions"

    def __init__(self, mod):
        self.mod = mod

    def run(self, torch, cfg, q, pos):
        rd = cfg.rotary_dim or q.shape[-1]
        table = self.mod.create_sinusoidal_positions(int(pos.max()) + 1, rd)
        sin, cos = torch.split(table[pos], rd // 2, dim=-1)
        x = q.transpose(1, 2)
        out = self.mod.apply_rotary_pos_emb(x[..., :rd], sin, cos)
        return torch.cat([out, x[..., rd:]], dim=-1).transpose(1, 2)


class RoFormerTable:
    """RoFormer: RoFormerSinusoidalPositionalEmbedding rows (create_weight) through the attention's static
    apply_rotary_position_embeddings."""
    __name__ = "RoFormerSinusoidalPositionalEmbedding"

    def __init__(self, mod):
        self.mod = mod

    def run(self, torch, cfg, q, pos):
        emb = self.mod.RoFormerSinusoidalPositionalEmbedding(int(pos.max()) + 1, q.shape[-1])
        table = emb.create_weight().to(q.dtype)[pos][:, None]
        return self.mod.RoFormerSelfAttention.apply_rotary_position_embeddings(table, q, q)[0]


def run_rotary(hf, mod, rot_cls, apply_name, cfg, q, pos, layer_type, inverse=False):
    """HF's rotary module (built here, so a float64 context reaches its init) and apply function on q [1,H,S,D];
    pos [1, S], or M-RoPE's [3, 1, S]. `inverse`: with (cos, -sin), as DeepSeek-V4 rotates its attention output."""
    torch = hf.torch
    if hasattr(rot_cls, "run"):
        return rot_cls.run(torch, cfg, q, pos)
    rot = rot_cls(cfg)
    params = inspect.signature(rot.forward).parameters
    x = torch.zeros(1, q.shape[2], 4, dtype=q.dtype)
    kw = {"layer_type": layer_type} if "layer_type" in params and layer_type else {}
    if mrope(cfg) and pos.dim() == 2:  # one id per axis [3, B, S]: the same on every axis, as for text tokens
        pos = pos[None].expand(3, *pos.shape)
    emb = rot(x, pos, **kw)
    fn = getattr(mod, apply_name)
    if isinstance(emb, tuple):
        cos, sin = emb[0], -emb[1] if inverse else emb[1]
        single = list(inspect.signature(fn).parameters)[1] == "cos"

        def call(x):
            return fn(x, cos, sin) if single else fn(x, x, cos, sin)[0]
        try:
            out = (call(q),)
        except RuntimeError:  # partial rotary (Phi, StableLM, Persimmon): the attention hands over q[..., :rd]
            rd = cos.shape[-1]
            out = (torch.cat([call(q[..., :rd]), q[..., rd:]], dim=-1),)
    else:  # complex freqs_cis [B,S,D/2]: DeepSeek-V2 applies it on [B,H,S,D], Llama 4 on [B,S,H,D]
        out = fn(q, q, emb)
        if out[0].shape != q.shape:
            out = tuple(o.transpose(1, 2) for o in fn(q.transpose(1, 2), q.transpose(1, 2), emb))
    return out[0]


def unit_images(hf, mod, rot_cls, apply_name, cfg, layer_type, pos):
    """m[j] = where HF's rotation takes e_j (every head dim a unit vector) at the one position `pos`."""
    torch = hf.torch
    d = head_of(cfg, layer_type)
    q = torch.eye(d, dtype=torch.float32)[None, :, None, :]  # head j holds e_j
    return run_rotary(hf, mod, rot_cls, apply_name, cfg, q, pos, layer_type)[0, :, 0, :]


def classify(hf, mod, rot_cls, apply_name, cfg, layer_type):
    """(pairing, rotary dims, rotated slice, {input dim: (dim its sin term reaches, first of its pair)}) from where
    unit vectors go (position 4097: every angle clear of 0 and of the 1e-9 threshold)."""
    torch = hf.torch
    d = head_of(cfg, layer_type)
    m = unit_images(hf, mod, rot_cls, apply_name, cfg, layer_type, torch.full((1, 1), 4097, dtype=torch.long))
    reach = [sorted(i for i in range(d) if abs(float(m[j, i])) > 1e-9) for j in range(d)]
    rotated = [j for j in range(d) if reach[j] != [j]]
    rd, off, still = len(rotated), 0, False
    if rd == 0:
        raise Refuse("it rotates no dim of the head")
    if rotated == list(range(d - rd, d)) and rd < d:
        off = d - rd  # DeepSeek-V4 rotates the head's trailing dims ([nope | rope])
    elif rotated != list(range(rd)) or rd % 2:
        rd, still = d, True  # pairs across the whole head, some of them not rotating (Gemma 4's proportional RoPE)
    h = rd // 2
    # Each pattern (on dims relative to the block): where input dim j's sin term lands, whether j is the first
    # member of its pair, and which outputs j reaches.
    patterns = [({"pairing": "half"}, lambda j: ((j + h) % rd, j < h), lambda j: {j, (j + h) % rd}),
                ({"pairing": "interleaved"}, lambda j: (j ^ 1, j % 2 == 0), lambda j: {j, j ^ 1}),
                ({"pairing": "interleaved", "output_pairing": "half"},
                 lambda j: (j // 2 + h if j % 2 == 0 else j // 2, j % 2 == 0), lambda j: {j // 2, j // 2 + h})]
    def fits(reaches, j):
        pair = sorted(off + i for i in reaches(j))
        return reach[off + j] == pair or (still and all(reach[i] == [i] for i in pair) and off + j in pair)
    for pairing, sin_at, reaches in patterns:
        if all(fits(reaches, j) for j in range(rd)):
            sin_map = {off + j: (off + sin_at(j)[0], sin_at(j)[1]) for j in range(rd)}
            if not sin_terms_positive(hf, mod, rot_cls, apply_name, cfg, layer_type, sin_map):
                raise Refuse("it rotates by minus the angle (e.g. rotate_half as cat(x2, -x1)); the spec cannot "
                             "express that")
            return pairing, rd, "trailing" if off else "leading", sin_map
    if still:
        raise Refuse(f"rotated dims {rotated[:8]}... are neither a leading nor a trailing even block of the head, "
                     "nor pairs of it")
    raise Refuse("the apply function's pairing is none of half, interleaved, interleaved-in/half-out")


def sin_terms_positive(hf, mod, rot_cls, apply_name, cfg, layer_type, sin_map):
    """At position 1 every angle is in (0, 1] rad: input dim j's sin term, at output sin_map[j], must be +sin for
    the first member of its pair and -sin for the second (HF's rotate_half: cat(-x2, x1))."""
    torch = hf.torch
    m = unit_images(hf, mod, rot_cls, apply_name, cfg, layer_type, torch.ones(1, 1, dtype=torch.long))
    for j, (i, first) in sin_map.items():
        v = float(m[j, i])
        if abs(v) > 1e-9 and (v > 0) != first:
            return False
    return True


def mrope_axes(hf, mod, rot_cls, apply_name, cfg, layer_type, sin_map):
    """M-RoPE, measured: the position axis each rotary pair follows (ids [3, 1, 1] with one axis at 1), as rope-gen's
    axes: {"layout": "contiguous" | "interleaved", "sections": [...]}; None for a rotary module of one axis."""
    torch = hf.torch
    firsts = sorted(j for j, (_, first) in sin_map.items() if first)  # one input dim per pair, in pair order
    axis_of = [None] * len(firsts)
    for a in range(3):
        pos = torch.zeros(3, 1, 1, dtype=torch.long)
        pos[a] = 1
        try:
            m = unit_images(hf, mod, rot_cls, apply_name, cfg, layer_type, pos)
        except Exception:  # noqa: BLE001 - a module of one axis, given three
            return None
        if m.shape[0] != head_of(cfg, layer_type):
            return None
        for i, j in enumerate(firsts):
            if abs(float(m[j, sin_map[j][0]])) > 1e-12:
                if axis_of[i] is not None:
                    return None  # one pair on several axes: ids of one axis broadcast, not M-RoPE
                axis_of[i] = a
    if any(a is None for a in axis_of) or len(set(axis_of)) < 2:
        return None
    n = len(axis_of)
    counts = [axis_of.count(a) for a in range(3)]
    contiguous = [a for a in range(3) for _ in range(counts[a])]
    interleaved = [r % 3 if r % 3 and r < 3 * counts[r % 3] else 0 for r in range(n)]
    if axis_of == contiguous:
        return {"layout": "contiguous", "sections": counts}
    if axis_of == interleaved:
        return {"layout": "interleaved", "sections": counts}
    raise Unsupported(f"its M-RoPE gives rotary pair r the position axis {axis_of}[r] (0, 1, 2: t, h, w): neither "
                      "contiguous sections nor the t, h, w round robin that rope-gen's axes express; a spec would need "
                      "an axes layout that lists each pair's axis")


def learned_parameters(hf, rot_cls, cfg):
    """None, or what a rotary module's learned parameters (weights of the checkpoint, not in config.json) do to its
    rotation: every one set to log 2, does position p rotate as position 2p did (frequencies times exp(param))?"""
    torch = hf.torch
    if not isinstance(rot_cls, type) or not issubclass(rot_cls, torch.nn.Module):
        return None
    rot = rot_cls(cfg)
    params = [(n, tuple(p.shape)) for n, p in rot.named_parameters()]
    if not params:
        return None
    x = torch.zeros(1, 1, 4)
    p1, p2 = torch.ones(1, 1, dtype=torch.long), torch.full((1, 1), 2, dtype=torch.long)
    with torch.no_grad():
        before = rot(x, p2)
        for _, p in rot.named_parameters():
            p.fill_(math.log(2.0))
        after = rot(x, p1)
    names = ", ".join(f"`{n}` {list(shape)}" for n, shape in params)
    if all(torch.allclose(a, b, atol=1e-6) for a, b in zip(before, after)):
        return (f"{rot_cls.__name__} multiplies every rotary frequency by exp({params[0][0]}), a learned parameter "
                f"({names}) stored in the checkpoint, not in config.json; a spec needs those trained values: "
                f"`frequency: {{scheme: custom, values: [...]}}` with HF's inv_freq x exp({params[0][0]}) per pair, "
                "read from the weights")
    return (f"{rot_cls.__name__} has learned parameters ({names}) that change its rotation; they are stored in the "
            "checkpoint, not in config.json, so a spec made from the config cannot follow them")


def rope_sets(hf, mod, rot_cls, apply_name, cfg, labels):
    """For a model whose rope parameters are keyed by labels of their own (DeepSeek-V4: main, compress) rather than
    by layer type: ({rope parameter set: [layer types]}: which set each layer type's attention picks, its
    `rope_layer_type`; whether that attention also rotates its output back), from the attention modules HF builds
    for a layer of each type; (None, False) for other models."""
    layer_types = list(getattr(cfg, "layer_types", None) or [])
    if not layer_types or set(labels) <= set(layer_types):
        return None, False
    for name, cls in vars(mod).items():
        if not (inspect.isclass(cls) and name.endswith("Attention") and cls.__module__ == mod.__name__):
            continue
        out, inverse = {}, False
        for lt in sorted(set(layer_types)):
            try:
                attention = cls(cfg, layer_types.index(lt))
            except Exception:  # noqa: BLE001 - an attention class of another form
                break
            label = getattr(attention, "rope_layer_type", None)
            if label in labels:
                out.setdefault(label, []).append(lt)
                inverse = inverse or rotates_output_back(hf, mod, rot_cls, apply_name, cfg, attention, labels)
        if out:
            return out, inverse
    return None, False


def rotates_output_back(hf, mod, rot_cls, apply_name, cfg, attention, labels):
    """Whether the attention's forward calls the apply function a second time with (cos, -sin) of a call before it
    (DeepSeek-V4 rotates its output's rope slice back), seen by running it with the calls recorded."""
    torch = hf.torch
    fn, calls = getattr(mod, apply_name), []

    def recording(x, cos, sin, *args, **kwargs):
        calls.append((cos.detach().clone(), sin.detach().clone()))
        return fn(x, cos, sin, *args, **kwargs)
    ids = torch.arange(4)[None]
    hidden = torch.randn(1, 4, cfg.hidden_size, generator=torch.Generator().manual_seed(0))
    rotary = rot_cls(cfg)
    embeddings = {label: rotary(hidden, ids, layer_type=label) for label in labels}
    setattr(mod, apply_name, recording)
    try:
        with torch.no_grad():
            attention(hidden_states=hidden, position_embeddings=embeddings, position_ids=ids, attention_mask=None)
    except Exception:  # noqa: BLE001 - a forward of another form: not measured
        return False
    finally:
        setattr(mod, apply_name, fn)
    return any(torch.equal(c1, c2) and torch.equal(s2, -s1) and s1.abs().max() > 0
               for i, (c1, s1) in enumerate(calls) for c2, s2 in calls[i + 1:])


class Refuse(Exception):
    pass


class Unsupported(Exception):
    """HF's RoPE is a construct the spec cannot express; the message names it and what a spec would need."""


def probe(hf, model_type):
    """(table entry, golden-case builder inputs) of one model type; None when it has no rotary module."""
    cfg_cls = hf.config_class(model_type)
    try:
        mod = hf.modeling(model_type)
    except Exception:
        return None, None
    full = cfg_cls()
    cfg = text_config(full)
    rot_cls = rotary_of(mod, cfg)
    if rot_cls is None:
        return None, None
    entry = {"text_model_type": getattr(cfg, "model_type", model_type)} if cfg is not full else {}
    if text_config_path(full) not in ([], ["text_config"]):
        entry["text_config_path"] = text_config_path(full)
    entry["defaults"] = {k: jsonable(getattr(cfg, k)) for k in DEFAULT_KEYS if getattr(cfg, k, None) is not None}
    # config.json spells some keys its own way (GPT-J n_embd, DBRX d_model / n_heads): the class's attribute_map
    names = {k: v for k, v in getattr(cfg, "attribute_map", {}).items() if k in DEFAULT_KEYS}
    if names:
        entry["key_names"] = names
    if "head_dim" in entry["defaults"] and head_dim_follows_hidden_size(type(cfg), cfg):
        del entry["defaults"]["head_dim"]  # derived (hidden_size // heads), not a default of its own
    for key, value in (("layer_type_defaults", layer_type_defaults(cfg)), ("layer_type_keys", layer_key_feeds(cfg))):
        if value:
            entry[key] = value
    rp = getattr(cfg, "rope_parameters", None) or {}
    feeds = legacy_feeds(type(cfg), rp)
    if feeds:
        entry["legacy_layer_keys"] = feeds
        if splits_flat_rope_parameters(type(cfg)):
            entry["splits_flat_rope_parameters"] = True
    nope = nope_layers(cfg)
    if nope:
        entry["nope_key"] = nope
    apply_name = apply_function(mod, cfg)
    entry["rotary_class"], entry["apply_function"] = rot_cls.__name__, apply_name
    if apply_name == "apply_rotary_pos_emb_interleave" and rope_interleave_selects(mod):
        entry["rope_interleave_selects"] = True
    layer_types = sorted(rp) if rp and all(isinstance(v, dict) for v in rp.values()) else [None]
    try:
        if apply_name is None:
            raise Refuse("no apply_rotary_pos_emb / apply_rotary_emb function in the modeling file")
        real, _ = realistic(hf, model_type)
        try:
            found, shrink = measure(hf, mod, rot_cls, apply_name, cfg, layer_types)
        except (Refuse, Unsupported):
            raise
        except Exception:  # noqa: BLE001 - class defaults HF's own code does not run on: a real config of it
            if real is None:
                raise
            full = real
            found, shrink = measure(hf, mod, rot_cls, apply_name, text_config(full), layer_types)
        if "mrope" in found:  # the module's own sections, where config.json names none (on the real head)
            sections = default_sections(hf, mod, rot_cls, apply_name, [cfg] + ([text_config(real)] if real else []))
            found["mrope"] = dict(found["mrope"], sections=sections) if sections else {"layout": found["mrope"]["layout"]}
        entry.update(found)
        # the layer types a rope parameter set serves, seen where every layer type occurs (a real config)
        sets, inverse = rope_sets(hf, mod, rot_cls, apply_name, tiny(text_config(real or full), shrink),
                                  [t for t in layer_types if t])
        if sets:
            entry["rope_sets"] = sets
        if inverse:
            entry["output_rotation"] = "inverse"
    except Unsupported as e:
        entry["unsupported"] = str(e)
        return entry, None
    except Refuse as e:
        entry["refused"] = str(e)
        return entry, None
    except Exception as e:  # HF code that does not run on a standalone probe
        tower = [w for w in ("Vision", "Audio", "VQ", "Sam") if w in type(cfg).__name__]
        entry["refused"] = (f"{type(cfg).__name__} is a {tower[0].lower()} tower's config whose RoPE (if any) the "
                            f"text rotary class does not run; from-hf reads text models" if tower else
                            f"HF's {rot_cls.__name__} / {apply_name} did not run standalone: {type(e).__name__}: {e}")[:300]
        return entry, None
    return entry, (mod, rot_cls, apply_name, full, layer_types, shrink)


def measure(hf, mod, rot_cls, apply_name, cfg, layer_types):
    """({pairing, output_pairing, rope_slice, mrope, reads_rotary_dim}, shrink) from HF's code on a tiny `cfg`
    (the real head where sizes are fixed in the code)."""
    why = learned_parameters(hf, rot_cls, cfg)
    if why:
        raise Unsupported(why)
    shrink = not mrope(cfg)  # M-RoPE sections are sized for the real head
    try:
        small = tiny(cfg, shrink)
        found = pairing_of(hf, mod, rot_cls, apply_name, small, layer_types)
    except RuntimeError:  # sizes fixed in the code: the real head, few heads
        shrink = False
    if shrink and "mrope" in found:  # the module's own M-RoPE sections are sized for the real head too
        shrink = False
    if not shrink:
        small = tiny(cfg, shrink)
        found = pairing_of(hf, mod, rot_cls, apply_name, small, layer_types)
    if getattr(cfg, "rotary_dim", None):  # a key of that name that HF reads (GPT-J) or not (MiniMax-M3-VL)
        found["reads_rotary_dim"] = classify(hf, mod, rot_cls, apply_name, small, layer_types[0])[1] == small.rotary_dim
    return found, shrink


def default_sections(hf, mod, rot_cls, apply_name, configs):
    """The M-RoPE sections HF's rotary module uses when config.json names none, measured on the first of `configs`
    (real heads) it runs on; None when it runs on none."""
    for cfg in configs:
        try:
            small = tiny(without_mrope_section(cfg), shrink=False)
            _, _, _, sin_map = classify(hf, mod, rot_cls, apply_name, small, None)
            axes = mrope_axes(hf, mod, rot_cls, apply_name, small, None, sin_map)
        except Exception:  # noqa: BLE001 - inconsistent class defaults (GLM-4V's head without its partial rotary)
            continue
        if axes:
            return axes["sections"]
    return None


def pairing_of(hf, mod, rot_cls, apply_name, small, layer_types):
    """The pairing every layer type shares, where the rotated dims sit, and M-RoPE's axes."""
    found = None
    for lt in layer_types:
        pairing, _, where, sin_map = classify(hf, mod, rot_cls, apply_name, small, lt)
        this = dict(pairing, **({"rope_slice": where} if where != "leading" else {}))
        axes = mrope_axes(hf, mod, rot_cls, apply_name, small, lt, sin_map)
        if axes:
            this["mrope"] = axes
        if found not in (None, this):
            raise Refuse("the pairing differs between layer types")
        found = this
    return found


def golden_case(hf, model_type, built, heads=True, inverse=False):
    """HF float32 and float64 outputs on random q at explicit positions, per layer type; `heads`: a tiny config.
    M-RoPE: ids that differ per axis; layer types whose heads differ (Gemma 4): q of each one's size; `inverse`:
    HF's rotation back too (its apply function with (cos, -sin)), which rope-gen's backward kernel must match."""
    torch = hf.torch
    mod, rot_cls, apply_name, full, layer_types, shrink = built
    small_full = copy.deepcopy(full)
    small = tiny(text_config(small_full), shrink) if heads else text_config(small_full)
    small_full = with_text_config(small_full, small)
    g = torch.Generator().manual_seed(seed_of(model_type))
    pos = torch.tensor([POSITIONS], dtype=torch.long)
    if mrope_of(hf, mod, rot_cls, apply_name, small, layer_types):
        pos = torch.stack([pos, pos // 3, (pos * 7) % 8192])  # [3, 1, S]: (t, h, w)
    case = {"model_type": model_type, "positions": POSITIONS}
    if pos.dim() == 3:
        case["axis_positions"] = pos[:, 0, :].T.tolist()
    cases, qs = [], {}
    for lt in layer_types:
        # MLA: HF rotates q_pe, the head's last qk_rope_head_dim dims; q_nope passes through.
        lc = layer_config(small, lt)
        d, nope = rope_dim_of(lc), lc.qk_nope_head_dim if mla(lc) else 0
        if (nope, d) not in qs:
            q = torch.randn(1, 1, len(POSITIONS), d, generator=g, dtype=torch.float32)
            qs[nope, d] = (torch.randn(1, 1, len(POSITIONS), nope, generator=g, dtype=torch.float32), q)
        q_nope, q = qs[nope, d]
        out32 = run_rotary(hf, mod, rot_cls, apply_name, small, q, pos, lt)
        with float64_sticks(torch):
            out64 = run_rotary(hf, mod, rot_cls, apply_name, copy.deepcopy(small), q.double(), pos, lt)
        err = float((out32.double() - out64).abs().max())
        out64 = torch.cat([q_nope.double(), out64], dim=-1)
        one = {"layer_type": lt, "out_q": digits(out64, 12),
               "tolerance": 2 * err + 1e-5 * float(q.abs().max()), "hf_float32_error": err}
        if inverse:
            with float64_sticks(torch):
                back = run_rotary(hf, mod, rot_cls, apply_name, copy.deepcopy(small), q.double(), pos, lt, True)
            one["out_q_inverse"] = digits(torch.cat([q_nope.double(), back], -1), 12)
        if len(qs) > 1 or layer_head_dims(small):  # each layer type's own q
            one.update(head_dim=q_nope.shape[-1] + d, q=digits(torch.cat([q_nope, q], -1), 9))
        cases.append(one)
    q_nope, q = next(iter(qs.values()))
    case.update(config=jsonable(config_dict(small_full)), head_dim=q_nope.shape[-1] + q.shape[-1],
                q=digits(torch.cat([q_nope, q], dim=-1), 9), cases=cases)
    return case


def digits(t, n):
    """A tensor's values to n significant digits, as the golden files keep them: 9 give float32 inputs back
    exactly, 12 keep the float64 outputs far inside the tolerance (2 x HF float32's error)."""
    return [float(f"{v:.{n}g}") for v in t.reshape(-1).tolist()]


def mrope_of(hf, mod, rot_cls, apply_name, cfg, layer_types):
    """Whether HF's rotary module of `cfg` is M-RoPE (its pairs follow different position axes)."""
    try:
        _, _, _, sin_map = classify(hf, mod, rot_cls, apply_name, cfg, layer_types[0])
        return mrope_axes(hf, mod, rot_cls, apply_name, cfg, layer_types[0], sin_map) is not None
    except Exception:  # noqa: BLE001 - probe() measured it already; a failure here is not M-RoPE
        return False


def real_config_case(hf, path, raw, models):
    """A real config.json loaded by its HF config class (4.x keys and all), HF's rotary code on one full-size head;
    `models`: the table, for whether HF's attention rotates its output back."""
    full = hf.config_class(raw["model_type"]).from_dict(raw)
    cfg = text_config(full)
    mt = getattr(cfg, "model_type", raw["model_type"])
    mod = hf.modeling(mt)
    rot_cls = rotary_of(mod, cfg)
    rp = getattr(cfg, "rope_parameters", None) or {}
    layer_types = sorted(rp) if rp and all(isinstance(v, dict) for v in rp.values()) else [None]
    built = (mod, rot_cls, apply_function(mod, cfg), full, layer_types, False)
    inverse = models.get(mt, {}).get("output_rotation") == "inverse"
    case = golden_case(hf, path.stem, built, heads=False, inverse=inverse)
    del case["config"]
    case["config_file"] = str(path.relative_to(ROOT))
    return case


def generate():
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    hf = Hf()
    hf.tf.utils.logging.set_verbosity_error()
    hf.torch.manual_seed(0)
    models, golden = {}, {}
    for mt in hf.model_types():
        try:
            entry, built = probe(hf, mt)
        except Exception as e:
            entry, built = {"refused": f"config class with defaults failed: {type(e).__name__}: {e}"[:300]}, None
        if entry is None:
            continue
        if built is not None:
            try:
                golden[mt] = golden_case(hf, mt, built, inverse=entry.get("output_rotation") == "inverse")
            except Exception as e:
                entry["refused"] = f"HF's rotary code on a tiny config failed: {type(e).__name__}: {e}"[:300]
        models[mt] = entry
    for path, raw in real_configs().items():
        golden[f"real/{path.stem}"] = real_config_case(hf, path, raw, models)
    table = {"transformers": hf.tf.__version__, "torch": hf.torch.__version__,
             "generated_by": "tests/golden/hf_model_table.py", "models": models}
    files = {TABLE: json.dumps(table, indent=1, sort_keys=True) + "\n"}
    for mt, case in golden.items():
        files[GOLDEN / f"{mt}.json"] = json.dumps(case, separators=(",", ":"), sort_keys=True) + "\n"
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", nargs="?", const=str(HERE / ".venv"), default=None,
                    help="run inside make_golden.py's venv (created and filled when missing)")
    ap.add_argument("--check", action="store_true", help="compare with the committed files; exit 1 on a difference")
    args = ap.parse_args()
    if args.venv and not os.environ.get("ROPE_GOLDEN_IN_VENV"):
        import make_golden
        make_golden.bootstrap_venv(Path(args.venv), False, [a for a in sys.argv[1:] if not a.startswith("--venv")])
    files = generate()
    if args.check:
        bad = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        stale = sorted(set(GOLDEN.glob("**/*.json")) - set(files))
        for p in bad + stale:
            print(f"DIFFERS {p.relative_to(ROOT)}", file=sys.stderr)
        print("check: " + ("OK" if not bad and not stale else f"{len(bad) + len(stale)} difference(s)"))
        return 1 if bad or stale else 0
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for p in set(GOLDEN.glob("**/*.json")) - set(files):
        p.unlink()
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    models = json.loads(files[TABLE])["models"]
    refused = sum(1 for e in models.values() if "refused" in e or "unsupported" in e)
    print(f"{len(models)} model types with a rotary module: {len(models) - refused} with a pairing, {refused} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
