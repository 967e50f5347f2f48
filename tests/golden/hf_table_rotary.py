"""Running a model's own rotary module and apply function, and what hf_model_table.py measures from it: the
pairing and where the rotated dims sit (unit vectors), M-RoPE's axes, learned rotary parameters, DeepSeek-V4's rope
sets and inverse output rotation. Nothing is parsed from source text. Used only by hf_model_table.py."""

import inspect
import math

from hf_table_configs import head_of, mrope


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
