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
REAL_CONFIGS = HERE / "hf_configs"  # real config.json files (reconstructed, see its README)
sys.path.insert(0, str(HERE))

# The keys from-hf reads; their defaults come from each config class.
DEFAULT_KEYS = ["head_dim", "hidden_size", "num_attention_heads", "partial_rotary_factor", "rotary_pct",
                "rotary_dim", "rotary_emb_base", "max_position_embeddings", "original_max_position_embeddings",
                "qk_rope_head_dim", "qk_nope_head_dim", "rope_interleave", "rope_parameters", "layer_types",
                "no_rope_layers", "dtype"]
TINY_HEAD = 16
POSITIONS = [0, 1, 7, 255, 1023, 4095, 6000, 8191]  # past 4096: scaled types' long branch with the tiny configs


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def jsonable(v):
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None  # HF writes Infinity (not JSON) for keys from-hf never reads
    return str(v)


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


def text_config(cfg):
    sub = getattr(cfg, "text_config", None)
    return sub if sub is not None and hasattr(sub, "to_dict") else cfg


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
    """The rotary class, or a stand-in that calls the model's own table functions (GPT-J, RoFormer)."""
    rot_cls = rotary_class(mod, type(cfg))
    if rot_cls is None and hasattr(mod, "create_sinusoidal_positions"):
        rot_cls = SinusoidalTable(mod)
    if rot_cls is None and hasattr(mod, "RoFormerSinusoidalPositionalEmbedding"):
        rot_cls = RoFormerTable(mod)
    return rot_cls


def apply_function(mod, cfg):
    if hasattr(mod, "RoFormerSelfAttention"):
        return "RoFormerSelfAttention.apply_rotary_position_embeddings"
    if getattr(cfg, "rope_interleave", False) and hasattr(mod, "apply_rotary_pos_emb_interleave"):
        return "apply_rotary_pos_emb_interleave"
    for name in ("apply_rotary_pos_emb", "apply_rotary_emb"):
        if callable(getattr(mod, name, None)):
            return name
    return None


def tiny(cfg, shrink=True):
    """The config with few heads, small ones unless `shrink` is false; every RoPE key stays."""
    c = copy.deepcopy(cfg)
    heads = 2
    if not shrink:  # the real head, 2 of them
        head = rope_dim_of(c)
        c.num_attention_heads, c.hidden_size = heads, heads * head
        return c
    if getattr(c, "rotary_dim", None):  # GPT-J, CodeGen: a partial rotary size of its own
        c.rotary_dim = TINY_HEAD // 2
    head = TINY_HEAD
    if getattr(c, "qk_rope_head_dim", None):  # MLA: every head size scaled alike (Mistral 4 ties them)
        scale = TINY_HEAD / c.qk_rope_head_dim
        head = int((getattr(c, "head_dim", None) or TINY_HEAD / scale) * scale)
        c.qk_rope_head_dim, c.qk_nope_head_dim = TINY_HEAD, int((c.qk_nope_head_dim or 0) * scale)
    with contextlib.suppress(AttributeError):  # Falcon's head_dim is a property of hidden_size / heads
        if getattr(c, "head_dim", None):
            c.head_dim = head
    if hasattr(c, "num_attention_heads"):
        c.num_attention_heads = heads
        if hasattr(c, "num_key_value_heads"):
            c.num_key_value_heads = 1
        c.hidden_size = heads * head
    return c


def mrope(c):
    rp = getattr(c, "rope_parameters", None) or {}
    return isinstance(rp, dict) and "mrope_section" in rp


def rope_dim_of(c):
    return getattr(c, "qk_rope_head_dim", None) or getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads


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


def run_rotary(hf, mod, rot_cls, apply_name, cfg, q, pos, layer_type):
    """HF's rotary module (built here, so a float64 context reaches its init) and apply function on q [1,H,S,D]."""
    torch = hf.torch
    if hasattr(rot_cls, "run"):
        return rot_cls.run(torch, cfg, q, pos)
    rot = rot_cls(cfg)
    params = inspect.signature(rot.forward).parameters
    x = torch.zeros(1, q.shape[2], 4, dtype=q.dtype)
    kw = {"layer_type": layer_type} if "layer_type" in params and layer_type else {}
    if mrope(cfg):  # one id per axis [3, B, S]: the same on every axis, as for text tokens
        pos = pos[None].expand(3, *pos.shape)
    emb = rot(x, pos, **kw)
    fn = getattr(mod, apply_name)
    if isinstance(emb, tuple):
        cos, sin = emb[0], emb[1]
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


def classify(hf, mod, rot_cls, apply_name, cfg, layer_type):
    """Pairing from where unit vectors go (position 1: every angle non-zero)."""
    torch = hf.torch
    d = rope_dim_of(cfg)
    q = torch.eye(d, dtype=torch.float32)[None, :, None, :]  # head j holds e_j
    pos = torch.full((1, 1), 4097, dtype=torch.long)  # every angle clear of 0 and of the 1e-9 threshold
    m = run_rotary(hf, mod, rot_cls, apply_name, cfg, q, pos, layer_type)[0, :, 0, :]  # m[j] = image of e_j
    reach = [sorted(i for i in range(d) if abs(float(m[j, i])) > 1e-9) for j in range(d)]
    rotated = [j for j in range(d) if reach[j] != [j]]
    rd = len(rotated)
    if rd == 0 or rotated != list(range(rd)) or rd % 2:
        raise Refuse(f"rotated dims {rotated[:8]}... are not a leading even block of the head")
    h = rd // 2
    # Each pattern: where input dim j's sin term lands, and whether j is the first member of its pair.
    patterns = [({"pairing": "half"}, lambda j: ((j + h) % rd, j < h), lambda j: {j, (j + h) % rd}),
                ({"pairing": "interleaved"}, lambda j: (j ^ 1, j % 2 == 0), lambda j: {j, j ^ 1}),
                ({"pairing": "interleaved", "output_pairing": "half"},
                 lambda j: (j // 2 + h if j % 2 == 0 else j // 2, j % 2 == 0), lambda j: {j // 2, j // 2 + h})]
    for pairing, sin_at, reaches in patterns:
        if all(reach[j] == sorted(reaches(j)) for j in range(rd)):
            if not sin_terms_positive(hf, mod, rot_cls, apply_name, cfg, layer_type, d,
                                      {j: sin_at(j) for j in range(rd)}):
                raise Refuse("it rotates by minus the angle (e.g. rotate_half as cat(x2, -x1)); the spec cannot "
                             "express that")
            return pairing, rd
    raise Refuse("the apply function's pairing is none of half, interleaved, interleaved-in/half-out")


def sin_terms_positive(hf, mod, rot_cls, apply_name, cfg, layer_type, d, sin_at):
    """At position 1 every angle is in (0, 1] rad: input dim j's sin term, at output sin_at(j), must be +sin for the
    first member of its pair and -sin for the second (HF's rotate_half: cat(-x2, x1))."""
    torch = hf.torch
    q = torch.eye(d, dtype=torch.float32)[None, :, None, :]
    m = run_rotary(hf, mod, rot_cls, apply_name, cfg, q, torch.ones(1, 1, dtype=torch.long), layer_type)[0, :, 0, :]
    for j, (i, first) in sin_at.items():
        v = float(m[j, i])
        if abs(v) > 1e-9 and (v > 0) != first:
            return False
    return True


class Refuse(Exception):
    pass


def legacy_feeds(hf, cfg_cls, default_rp):
    """Which 4.x kwargs feed which layer type's rope parameters: instantiate with marker values."""
    if not default_rp or not all(isinstance(v, dict) for v in default_rp.values()):
        return None
    try:
        c = cfg_cls(rope_scaling={"rope_type": "linear", "factor": 7.0}, rope_theta=1111.0,
                    rope_local_base_freq=2222.0)
    except Exception:
        return None
    rp = text_config(c).rope_parameters or {}
    out = {}
    for lt, p in rp.items():
        feed = {}
        if p.get("rope_theta") == 1111.0:
            feed["rope_theta"] = "rope_theta"
        elif p.get("rope_theta") == 2222.0:
            feed["rope_theta"] = "rope_local_base_freq"
        feed["rope_scaling"] = p.get("factor") == 7.0
        out[lt] = feed
    return out


def head_dim_follows_hidden_size(cls, cfg):
    """Whether the class derives head_dim from hidden_size (then a config without head_dim must derive it too)."""
    try:
        return cls(hidden_size=cfg.hidden_size * 2).head_dim != cfg.head_dim
    except Exception:
        return True


def nope_layers(cfg):
    """NoPE layers: HF's attention reads `use_rope = config.no_rope_layers[layer_idx]` (1 = RoPE)."""
    layers = getattr(cfg, "no_rope_layers", None)
    return "no_rope_layers" if isinstance(layers, list) else None


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
    entry["defaults"] = {k: jsonable(getattr(cfg, k)) for k in DEFAULT_KEYS if getattr(cfg, k, None) is not None}
    # config.json spells some keys its own way (GPT-J n_embd, DBRX d_model / n_heads): the class's attribute_map
    names = {k: v for k, v in getattr(cfg, "attribute_map", {}).items() if k in DEFAULT_KEYS}
    if names:
        entry["key_names"] = names
    if "head_dim" in entry["defaults"] and head_dim_follows_hidden_size(type(cfg), cfg):
        del entry["defaults"]["head_dim"]  # derived (hidden_size // heads), not a default of its own
    rp = getattr(cfg, "rope_parameters", None) or {}
    feeds = legacy_feeds(hf, cfg_cls, rp)
    if feeds:
        entry["legacy_layer_keys"] = feeds
    nope = nope_layers(cfg)
    if nope:
        entry["nope_key"] = nope
    apply_name = apply_function(mod, cfg)
    entry["rotary_class"], entry["apply_function"] = rot_cls.__name__, apply_name
    layer_types = sorted(rp) if rp and all(isinstance(v, dict) for v in rp.values()) else [None]
    try:
        if apply_name is None:
            raise Refuse("no apply_rotary_pos_emb / apply_rotary_emb function in the modeling file")
        shrink = not mrope(cfg)  # M-RoPE sections are sized for the real head
        try:
            pairing = pairing_of(hf, mod, rot_cls, apply_name, tiny(cfg, shrink), layer_types)
        except RuntimeError:  # sizes fixed in the code: the real head, few heads
            shrink = False
            pairing = pairing_of(hf, mod, rot_cls, apply_name, tiny(cfg, shrink), layer_types)
        entry.update(pairing)
        if getattr(cfg, "rotary_dim", None):  # a key of that name that HF reads (GPT-J) or not (MiniMax-M3-VL)
            small = tiny(cfg, shrink)
            entry["reads_rotary_dim"] = classify(hf, mod, rot_cls, apply_name, small, layer_types[0])[1] == small.rotary_dim
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


def pairing_of(hf, mod, rot_cls, apply_name, small, layer_types):
    pairing = None
    for lt in layer_types:
        p, _ = classify(hf, mod, rot_cls, apply_name, small, lt)
        if pairing not in (None, p):
            raise Refuse("the pairing differs between layer types")
        pairing = p
    return pairing


def golden_case(hf, model_type, built, heads=True):
    """HF float32 and float64 outputs on random q at explicit positions, per layer type; `heads`: a tiny config."""
    torch = hf.torch
    mod, rot_cls, apply_name, full, layer_types, shrink = built
    small_full = copy.deepcopy(full)
    small = tiny(text_config(small_full), shrink) if heads else text_config(small_full)
    if text_config(small_full) is not small_full:
        small_full.text_config = small
    else:
        small_full = small
    d = rope_dim_of(small)
    nope = getattr(small, "qk_nope_head_dim", None) if getattr(small, "qk_rope_head_dim", None) else 0
    g = torch.Generator().manual_seed(seed_of(model_type))
    q = torch.randn(1, 1, len(POSITIONS), d, generator=g, dtype=torch.float32)
    # MLA: HF rotates q_pe, the head's last qk_rope_head_dim dims; q_nope passes through.
    q_nope = torch.randn(1, 1, len(POSITIONS), nope or 0, generator=g, dtype=torch.float32)
    pos = torch.tensor([POSITIONS], dtype=torch.long)
    cases = []
    for lt in layer_types:
        out32 = run_rotary(hf, mod, rot_cls, apply_name, small, q, pos, lt)
        with float64_sticks(torch):
            out64 = run_rotary(hf, mod, rot_cls, apply_name, copy.deepcopy(small), q.double(), pos, lt)
        err = float((out32.double() - out64).abs().max())
        out64 = torch.cat([q_nope.double(), out64], dim=-1)
        cases.append({"layer_type": lt, "out_q": [float(v) for v in out64.reshape(-1).tolist()],
                      "tolerance": 2 * err + 1e-5 * float(q.abs().max()), "hf_float32_error": err})
    config = jsonable(small_full.to_dict())
    q = torch.cat([q_nope, q], dim=-1)
    return {"model_type": model_type, "config": config, "head_dim": q.shape[-1], "positions": POSITIONS,
            "q": [float(v) for v in q.reshape(-1).tolist()], "cases": cases}


def real_config_case(hf, path):
    """A real config.json loaded by its HF config class (4.x keys and all), HF's rotary code on one full-size head."""
    torch = hf.torch
    raw = json.loads(path.read_text())
    full = hf.config_class(raw["model_type"]).from_dict(raw)
    cfg = text_config(full)
    mt = getattr(cfg, "model_type", raw["model_type"])
    mod = hf.modeling(mt)
    rot_cls = rotary_of(mod, cfg)
    rp = getattr(cfg, "rope_parameters", None) or {}
    layer_types = sorted(rp) if rp and all(isinstance(v, dict) for v in rp.values()) else [None]
    built = (mod, rot_cls, apply_function(mod, cfg), full, layer_types, False)
    case = golden_case(hf, path.stem, built, heads=False)
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
                golden[mt] = golden_case(hf, mt, built)
            except Exception as e:
                entry["refused"] = f"HF's rotary code on a tiny config failed: {type(e).__name__}: {e}"[:300]
        models[mt] = entry
    for path in sorted(REAL_CONFIGS.glob("*.json")) + sorted((ROOT / "examples" / "hf_configs").glob("*.json")):
        golden[f"real/{path.stem}"] = real_config_case(hf, path)
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
    refused = sum(1 for e in models.values() if "refused" in e)
    print(f"{len(models)} model types with a rotary module: {len(models) - refused} with a pairing, {refused} refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
