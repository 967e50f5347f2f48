#!/usr/bin/env python3
"""Generate rope-gen golden data from reference ("peer") RoPE implementations.

Each case runs a peer -- Hugging Face transformers' own rotary classes and apply
functions, lucidrains' rotary-embedding-torch, or a small stand-in written here
from a published formula / from the user's seed documents -- on tiny,
deterministic float32 inputs.  One JSON file per case goes to data/<case>.json
(format: see SEMANTICS.md), plus data/VERSIONS.json with the peer versions; the
multi-axis / run-time-frequency / backward / table / sinusoidal / learned / ALiBi
cases go to data/encodings/<case>.json, each holding one CLI call's inputs and
outputs (SEMANTICS.md section 6).

The script only *calls* the peers.  It also holds an independent float64
evaluation of every case's rope-gen spec and refuses to write a case whose spec
does not reproduce the peer (so each spec is known to mean what the peer did).

Usage (from the repository root):
  python3 tests/golden/make_golden.py --venv          # create tests/golden/.venv, install peers, regenerate
  python3 tests/golden/make_golden.py --venv DIR      # same, with the venv at DIR (reused if present)
  python3 tests/golden/make_golden.py --venv --pinned # install the versions recorded in data/VERSIONS.json
  python3 tests/golden/make_golden.py                 # use the current interpreter
  python3 tests/golden/make_golden.py --check         # regenerate in memory, compare with data/, exit 1 on drift
  python3 tests/golden/make_golden.py --only 'lr_*'   # only cases matching a glob
"""

import argparse
import fnmatch
import json
import math
import os
import subprocess
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_VENV = HERE / ".venv"
DEFAULT_OUT = HERE / "data"
PACKAGES = ["torch", "transformers", "rotary-embedding-torch", "numpy"]
PIP_NAMES = {"torch": "torch", "transformers": "transformers",
             "rotary-embedding-torch": "rotary-embedding-torch", "numpy": "numpy"}
IN_VENV_ENV = "ROPE_GOLDEN_IN_VENV"


# --------------------------------------------------------------------------------------
# venv bootstrap
# --------------------------------------------------------------------------------------

def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _has_peers(py: Path) -> bool:
    probe = "import torch, transformers, rotary_embedding_torch, numpy"
    return subprocess.run([str(py), "-c", probe], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def bootstrap_venv(venv: Path, pinned: bool, argv_rest):
    venv = venv.resolve()
    py = _venv_python(venv)
    if not py.exists():
        print(f"[make_golden] creating venv {venv}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", str(venv)])
    if pinned:
        versions = json.loads((DEFAULT_OUT / "VERSIONS.json").read_text())
        pkgs = []
        for name in PACKAGES:
            v = versions[name].split("+")[0]
            pkgs.append(f"{PIP_NAMES[name]}=={v}")
        print(f"[make_golden] installing pinned {pkgs}", file=sys.stderr)
        subprocess.check_call([str(py), "-m", "pip", "install", *pkgs])
    elif not _has_peers(py):
        print(f"[make_golden] installing {PACKAGES} into {venv}", file=sys.stderr)
        subprocess.check_call([str(py), "-m", "pip", "install", *PACKAGES])
    env = dict(os.environ)
    env[IN_VENV_ENV] = "1"
    args = [str(py), str(Path(__file__).resolve()), *argv_rest]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(str(py), args, env)


# --------------------------------------------------------------------------------------
# small helpers (no peer code here)
# --------------------------------------------------------------------------------------

def seed_of(name: str, k: int = 0) -> int:
    return (zlib.crc32(name.encode()) + 7919 * k) & 0x7FFFFFFF


def randn(torch, shape, name, k):
    g = torch.Generator().manual_seed(seed_of(name, k))
    return torch.randn(*shape, generator=g, dtype=torch.float32)


def flat(t):
    """Flatten a float32 tensor to a list of Python floats (exact float64 copies)."""
    return [float(v) for v in t.detach().to("cpu").reshape(-1).tolist()]


def _yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_scalar(x) for x in v) + "]"
    return str(v)


def spec_yaml(spec: dict) -> str:
    """rope-gen spec v1 as YAML text (block maps for frequency/scaling/xpos, flow lists)."""
    lines = []
    for key, val in spec.items():
        if isinstance(val, dict):
            lines.append(f"{key}:")
            for k2, v2 in val.items():
                lines.append(f"  {k2}: {_yaml_scalar(v2)}")
        else:
            lines.append(f"{key}: {_yaml_scalar(val)}")
    return "\n".join(lines) + "\n"


def make_spec(name, head_dim, *, rotary_dim=None, rotary_offset=0, pairing="half", layout="bhsd",
              frequency=None, scaling=None, xpos=None, positions="implicit", extra=None):
    spec = {"name": name, "head_dim": head_dim, "rotary_dim": rotary_dim or head_dim}
    if rotary_offset:
        spec["rotary_offset"] = rotary_offset
    spec["pairing"] = pairing
    if extra:  # proposed keys (see SEMANTICS.md, "Proposed spec keys")
        spec.update(extra)
    spec["layout"] = layout
    spec["dtype"] = "f32"
    spec["frequency"] = frequency or {"scheme": "lang", "theta": 10000.0}
    if scaling:
        spec["scaling"] = scaling
    if xpos:
        spec["xpos"] = xpos
    spec["positions"] = positions
    return spec


def record(name, peer, spec, inv_freq, attention_factor, *, seq_len=None, q=None, k=None, out_q=None,
           out_k=None, positions=None, offset=None):
    rec = {"case": name, "peer": peer, "spec": spec}
    if seq_len is not None:
        rec["seq_len"] = int(seq_len)
    rec["inv_freq"] = [float(x) for x in inv_freq]
    rec["attention_factor"] = float(attention_factor)
    rec["layout"] = spec["layout"]
    if q is not None:
        rec["q_shape"] = list(q.shape)
        rec["q"] = flat(q)
    if k is not None:
        rec["k_shape"] = list(k.shape)
        rec["k"] = flat(k)
    if positions is not None:
        rec["positions"] = [int(p) for p in positions.reshape(-1).tolist()]
        rec["positions_shape"] = list(positions.shape)
    if offset is not None:
        rec["offset"] = int(offset)
    if out_q is not None:
        rec["out_q"] = flat(out_q)
    if out_k is not None:
        rec["out_k"] = flat(out_k)
    return rec


def dump_record(rec: dict) -> str:
    """Compact, diff-friendly JSON: one top-level key per line; floats via repr (exact round trip)."""
    parts = []
    for key, val in rec.items():
        parts.append(f"  {json.dumps(key)}: {json.dumps(val, separators=(', ', ': '))}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


# --------------------------------------------------------------------------------------
# Independent float64 evaluation of a rope-gen spec (used only as a cross-check)
# --------------------------------------------------------------------------------------

def spec_inv_freq(spec: dict, seq_len):
    """Return (inv_freq[rotary_dim/2] in float64, attention_factor) from the spec alone."""
    rd = spec["rotary_dim"]
    half = rd // 2
    fr = spec["frequency"]
    sc = spec.get("scaling") or {}
    st = sc.get("type")
    scheme = fr["scheme"]
    theta = float(fr.get("theta", 10000.0))
    idx = [2.0 * i / rd for i in range(half)]
    if st == "ntk":
        theta *= sc["factor"] ** (rd / (rd - 2))
    if st == "dynamic":
        omax = sc["original_max_position"]
        L = max(seq_len, omax)
        theta *= ((sc["factor"] * L / omax) - (sc["factor"] - 1)) ** (rd / (rd - 2))
    if scheme == "lang":
        inv = [theta ** (-e) for e in idx]
    elif scheme == "pixel":
        mf = float(fr.get("max_freq", 10.0))
        hi = mf / 2
        inv = [math.pi * (1.0 + (hi - 1.0) * i / (half - 1) if half > 1 else 1.0) for i in range(half)]
    elif scheme == "constant":
        inv = [float(fr.get("value", 1.0))] * half
    elif scheme == "custom":
        inv = [float(v) for v in fr["values"]]
        assert len(inv) == half
    else:
        raise ValueError(scheme)
    att = 1.0
    if st == "linear":
        inv = [v / sc["factor"] for v in inv]
    elif st == "yarn":
        factor = sc["factor"]
        omax = sc["original_max_position"]
        bf = sc.get("beta_fast", 32)
        bs = sc.get("beta_slow", 1)

        def mscale_of(s, m=1.0):
            return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

        if "attention_factor" in sc:
            att = sc["attention_factor"]
        elif sc.get("mscale") and sc.get("mscale_all_dim"):
            att = mscale_of(factor, sc["mscale"]) / mscale_of(factor, sc["mscale_all_dim"])
        else:
            att = mscale_of(factor)

        def corr_dim(rot):
            return rd * math.log(omax / (rot * 2 * math.pi)) / (2 * math.log(theta))

        lo, hi = corr_dim(bf), corr_dim(bs)
        if sc.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, rd - 1)
        if lo == hi:
            hi += 0.001
        out = []
        for i, v in enumerate(inv):
            ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)  # 0 -> extrapolate, 1 -> interpolate
            out.append(v / factor * ramp + v * (1.0 - ramp))
        inv = out
    elif st == "longrope":
        omax = sc["original_max_position"]
        factor = sc["factor"]
        policy = sc.get("policy", "per_call")
        use_long = policy == "long" or (policy == "per_call" and seq_len is not None and seq_len > omax)
        ext = sc["long_factor"] if use_long else sc["short_factor"]
        inv = [v / e for v, e in zip(inv, ext)]
        if "attention_factor" in sc:
            att = sc["attention_factor"]
        else:
            att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(omax))
    elif st == "llama3":
        factor = sc["factor"]
        lf, hf = sc["low_freq_factor"], sc["high_freq_factor"]
        omax = sc["original_max_position"]
        lo_wl, hi_wl = omax / lf, omax / hf
        out = []
        for v in inv:
            wl = 2 * math.pi / v
            if wl < hi_wl:
                out.append(v)
            elif wl > lo_wl:
                out.append(v / factor)
            else:
                s = (omax / wl - lf) / (hf - lf)
                out.append((1 - s) * v / factor + s * v)
        inv = out
    return inv, att


def pair_axes(spec):
    """Position axis of every rotary pair: contiguous `axes.sections` (pairs per axis, in order), or with
    `axes.interleaved` Qwen3-VL's round robin (axis a >= 1 where r % n == a and r < n * sections[a], else 0)."""
    half = spec["rotary_dim"] // 2
    axes = spec.get("axes")
    if not axes:
        return [0] * half
    sec = axes["sections"]
    n = len(sec)
    if axes.get("interleaved"):
        return [next((a for a in range(1, n) if r % n == a and r < n * sec[a]), 0) for r in range(half)]
    return [a for a, k in enumerate(sec) for _ in range(k)]


def pair_dims(spec, pairing):
    """Feature indices (a, b) of every rotary pair for a pairing."""
    off, half = spec.get("rotary_offset", 0), spec["rotary_dim"] // 2
    if pairing == "half":
        return [off + i for i in range(half)], [off + i + half for i in range(half)]
    return [off + 2 * i for i in range(half)], [off + 2 * i + 1 for i in range(half)]


def rope_factors(np, spec, pos, inv, att, xpos_sign, seq_len):
    """Angle and factor (attention factor x xPos scale) of every pair, [..., rd/2]; pos is [..., n_axes]."""
    rd = spec["rotary_dim"]
    ang = pos[..., pair_axes(spec)].astype(np.float64) * np.asarray(inv)
    scale = np.full_like(ang, att)
    if "xpos" in spec:
        base = spec["xpos"]["scale_base"]
        sv = (np.arange(0, rd, 2) + 0.4 * rd) / (1.4 * rd)
        power = (pos[..., :1].astype(np.float64) - (seq_len // 2)) / base
        scale = scale * sv ** (power * xpos_sign)
    return ang, scale


def spec_apply(np, spec, x, pos, inv, att, xpos_sign, seq_len):
    """Apply the spec to x (numpy float64, in spec layout); pos [..., n_axes] broadcastable to the token grid."""
    ang, k = rope_factors(np, spec, pos, inv, att, xpos_sign, seq_len)
    c, s = np.cos(ang), np.sin(ang)
    ia, ib = pair_dims(spec, spec["pairing"])
    oa, ob = pair_dims(spec, spec.get("output_pairing", spec["pairing"]))
    a, b = x[..., ia], x[..., ib]
    y = x.copy()
    y[..., oa] = (a * c - b * s) * k
    y[..., ob] = (b * c + a * s) * k
    return y


def spec_backward(np, spec, g, saved, pos, inv, att, xpos_sign, seq_len):
    """dL/dx of spec_apply for the upstream gradient g (the transposed rotation, read at the output pairing's dims,
    written at the input pairing's; pass-through dims unchanged), and with `saved` (the forward input) also
    dL/d(inv_freq) = sum over tokens of pos * k * (g1*y0 - g0*y1), y the unscaled rotation of the saved pair."""
    ang, k = rope_factors(np, spec, pos, inv, att, xpos_sign, seq_len)
    c, s = np.cos(ang), np.sin(ang)
    ia, ib = pair_dims(spec, spec["pairing"])
    oa, ob = pair_dims(spec, spec.get("output_pairing", spec["pairing"]))
    g0, g1 = g[..., oa], g[..., ob]
    dx = g.copy()
    dx[..., ia] = (g0 * c + g1 * s) * k
    dx[..., ib] = (g1 * c - g0 * s) * k
    if saved is None:
        return dx, None
    a, b = saved[..., ia], saved[..., ib]
    y0, y1 = a * c - b * s, b * c + a * s
    pair_pos = np.broadcast_to(pos[..., pair_axes(spec)], ang.shape)
    dfreq = (pair_pos * k * (g1 * y0 - g0 * y1)).reshape(-1, ang.shape[-1]).sum(axis=0)
    return dx, dfreq


def qk_norm_factor(spec, weight):
    """w' of the spec's qk_norm: w, 1 + w (rms_one_plus), 1 (weight none)."""
    norm = spec["qk_norm"]
    if norm.get("weight", "per_head") == "none":
        return 1.0
    return 1.0 + weight if norm.get("type", "rms") == "rms_one_plus" else weight


def qk_inv_rms(np, spec, x):
    return 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + float(spec["qk_norm"]["eps"]))


def qk_normed(np, spec, x, weight):
    """Each row (head_dim) as x / rms * w'."""
    return x * qk_inv_rms(np, spec, x) * qk_norm_factor(spec, weight)


def qk_norm_backward(np, spec, x, d_normed, weight):
    """dL/dx of qk_normed from dL/d(normed): (g - x (g . x) / (head_dim rms^2)) / rms, g = d_normed w'; and
    dL/dw = the sum over every row of d_normed x / rms."""
    inv = qk_inv_rms(np, spec, x)
    g = d_normed * qk_norm_factor(spec, weight)
    dx = inv * (g - x * inv * inv * (g * x).mean(axis=-1, keepdims=True))
    return dx, (d_normed * x * inv).reshape(-1, x.shape[-1]).sum(axis=0)


TOKEN_DIMS = {  # layout -> (batch dim, sequence dim) in x; batch None: packed tokens
    "bshd": (0, 1), "bhsd": (0, 2), "sbhd": (1, 0), "thd": (None, 0), "bsd": (0, 1), "sbd": (1, 0), "td": (None, 0)}


def position_grid(np, layout, shape, inputs, options, n_axes):
    """Positions [..., n_axes] of x's tokens, broadcastable to x.shape[:-1]. Implicit: offset + index, restarting at
    every cu_seqlens start when packed. Explicit: ids shaped as the token dims, or [S] shared by the batch; with a
    trailing axis dim for multi-axis specs."""
    bd, sd = TOKEN_DIMS[layout]
    lead = shape[:-1]
    B, S = (1 if bd is None else lead[bd]), lead[sd]
    if "positions" in inputs:
        p = np.asarray(inputs["positions"]["data"], dtype=np.int64).reshape(inputs["positions"]["shape"])
        p = p.reshape(p.shape + (1,)) if n_axes == 1 else p
        if p.ndim == 2:                                              # [S, n]: shared, or packed [T, n]
            p = np.broadcast_to(p[None], (B,) + p.shape)
        elif layout in ("sbhd", "sbd"):
            p = p.transpose(1, 0, 2)
    else:
        idx = np.arange(S)
        if "cu_seqlens" in inputs:
            cu = np.asarray(inputs["cu_seqlens"]["data"], dtype=np.int64)
            idx = idx - cu[np.searchsorted(cu, idx, side="right") - 1]
        p = np.broadcast_to((options.get("offset", 0) + idx)[None, :, None], (B, S, n_axes))
    core, src = (p, [bd, sd]) if bd is not None else (p[0], [sd])   # [B, S, n] or [T, n]
    g = core.reshape(core.shape[:-1] + (1,) * (len(lead) - len(src)) + core.shape[-1:])
    return np.moveaxis(g, list(range(len(src))), src)


def token_positions(np, rec, shape):
    """position_grid for a rope record of data/*.json: [..., 1]."""
    inputs = {"positions": {"data": rec["positions"], "shape": rec["positions_shape"]}} if "positions" in rec else {}
    return position_grid(np, rec["layout"], shape, inputs, {"offset": rec.get("offset", 0)}, 1)


def cross_check(np, rec, spec, tol):
    """Evaluate the spec in float64 and compare with the peer; returns a short report string."""
    inv, att = spec_inv_freq(spec, rec.get("seq_len"))
    peer_inv = np.asarray(rec["inv_freq"])
    rel = np.max(np.abs(np.asarray(inv) - peer_inv) / np.maximum(np.abs(peer_inv), 1e-30)) if len(inv) else 0.0
    if not (rel < 2e-6 or (np.max(np.abs(np.asarray(inv) - peer_inv)) < 1e-12)):
        raise AssertionError(f"{rec['case']}: inv_freq mismatch, max rel {rel}\nspec {inv}\npeer {list(peer_inv)}")
    if abs(att - rec["attention_factor"]) > 1e-6 * max(1.0, abs(att)):
        raise AssertionError(f"{rec['case']}: attention_factor spec {att} vs peer {rec['attention_factor']}")
    worst = 0.0
    for which, sign in (("q", 1), ("k", -1)):
        if which not in rec:
            continue
        shape = rec[f"{which}_shape"]
        x = np.asarray(rec[which], dtype=np.float64).reshape(shape)
        pos = token_positions(np, rec, shape)
        want = spec_apply(np, spec, x, pos, inv, att, sign, rec.get("seq_len"))
        got = np.asarray(rec[f"out_{which}"], dtype=np.float64).reshape(shape)
        err = float(np.max(np.abs(want - got)))
        worst = max(worst, err)
        if err > tol:
            raise AssertionError(f"{rec['case']}: out_{which} differs from spec evaluation by {err}")
    return f"inv rel {rel:.1e}, out abs {worst:.1e}"


def check_rope_case(np, rec, spec, tol):
    assert len(rec["inv_freq"]) == spec["rotary_dim"] // 2, rec["case"]
    if "q_shape" in rec:
        assert rec["q_shape"][-1] == spec["head_dim"], rec["case"]
    return cross_check(np, rec, spec, tol)


def written_files(out_dir):
    """The case files under out_dir (VERSIONS.json included), as paths relative to it."""
    return [x.relative_to(out_dir).as_posix() for x in (*out_dir.glob("*.json"), *out_dir.glob(f"{ENC_SUBDIR}*.json"))]


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


class Ctx:
    def __init__(self):
        import numpy
        import torch
        import transformers
        import rotary_embedding_torch
        self.np = numpy
        self.torch = torch
        self.transformers = transformers
        self.ret = rotary_embedding_torch
        self.tf_ver = transformers.__version__
        from importlib.metadata import version
        self.ret_ver = version("rotary-embedding-torch")


def rope_cfg_kwargs(rp):
    """Config kwargs for a RoPE parameter dict: transformers >= 5 takes `rope_parameters`;
    4.x takes `rope_theta` (+ `partial_rotary_factor`) and a `rope_scaling` dict."""
    from transformers import modeling_rope_utils
    rp = dict(rp)
    if hasattr(modeling_rope_utils, "RopeParameters"):
        return {"rope_parameters": rp}
    kw = {"rope_theta": rp.pop("rope_theta", 10000.0)}
    if "partial_rotary_factor" in rp:
        kw["partial_rotary_factor"] = rp.pop("partial_rotary_factor")
    if rp.get("rope_type", "default") != "default":
        kw["rope_scaling"] = rp
    return kw


def pos_implicit(torch, B, S, offset=0):
    return (torch.arange(S, dtype=torch.int64) + offset)[None, :].expand(B, S)


# ---------------- Hugging Face: Llama-family classes ----------------

def hf_llama_run(ctx, name, *, head_dim=16, n_heads=3, n_kv=None, B=1, S=6, positions=None, max_pos=64,
                 rope_parameters=None, layout="bhsd", q_needed=True):
    """LlamaRotaryEmbedding + apply_rotary_pos_emb from models.llama.modeling_llama."""
    torch = ctx.torch
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as ml
    n_kv = n_kv or n_heads
    cfg = LlamaConfig(hidden_size=head_dim * n_heads, num_attention_heads=n_heads, num_key_value_heads=n_kv,
                      head_dim=head_dim, max_position_embeddings=max_pos, intermediate_size=32,
                      num_hidden_layers=1, vocab_size=16,
                      **rope_cfg_kwargs(rope_parameters or {"rope_type": "default", "rope_theta": 10000.0}))
    rot = ml.LlamaRotaryEmbedding(cfg)
    pid = positions if positions is not None else pos_implicit(torch, B, S)
    Bp, Sp = pid.shape
    x = torch.zeros(Bp, Sp, head_dim, dtype=torch.float32)
    cos, sin = rot(x, pid)                                   # [B, S, D]
    out = {"rot": rot, "inv_freq": rot.inv_freq.clone(), "att": rot.attention_scaling,
           "seq_len": int(pid.max()) + 1, "pid": pid}
    if not q_needed:
        return out
    if layout == "bhsd":
        q = randn(torch, (Bp, n_heads, Sp, head_dim), name, 1)
        k = randn(torch, (Bp, n_kv, Sp, head_dim), name, 2)
        oq, ok = ml.apply_rotary_pos_emb(q, k, cos, sin)            # unsqueeze_dim=1
    elif layout == "bshd":
        q = randn(torch, (Bp, Sp, n_heads, head_dim), name, 1)
        k = randn(torch, (Bp, Sp, n_kv, head_dim), name, 2)
        oq, ok = ml.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
    elif layout == "sbhd":
        q = randn(torch, (Sp, Bp, n_heads, head_dim), name, 1)
        k = randn(torch, (Sp, Bp, n_kv, head_dim), name, 2)
        oq, ok = ml.apply_rotary_pos_emb(q, k, cos.transpose(0, 1), sin.transpose(0, 1), unsqueeze_dim=2)
    elif layout == "thd":
        assert Bp == 1
        q = randn(torch, (Sp, n_heads, head_dim), name, 1)
        k = randn(torch, (Sp, n_kv, head_dim), name, 2)
        oq, ok = ml.apply_rotary_pos_emb(q, k, cos[0], sin[0], unsqueeze_dim=1)
    else:
        raise ValueError(layout)
    out.update(q=q, k=k, out_q=oq, out_k=ok)
    return out


def hf_peer(ctx, what):
    return f"transformers {ctx.tf_ver}: {what}"


LLAMA_PEER = "LlamaRotaryEmbedding + apply_rotary_pos_emb (models.llama.modeling_llama)"


def hf_case(ctx, name, spec_kw, run_kw, *, explicit=False, seq_len=False, peer=LLAMA_PEER):
    r = hf_llama_run(ctx, name, **run_kw)
    spec = make_spec(name, run_kw.get("head_dim", 16), layout=run_kw.get("layout", "bhsd"),
                     positions="explicit" if explicit else "implicit", **spec_kw)
    pid = r["pid"][0] if run_kw.get("layout") == "thd" else r["pid"]      # thd: positions_shape [T]
    return record(name, hf_peer(ctx, peer), spec, r["inv_freq"].tolist(), r["att"],
                  seq_len=r["seq_len"] if seq_len else None,
                  q=r.get("q"), k=r.get("k"), out_q=r.get("out_q"), out_k=r.get("out_k"),
                  positions=pid if explicit else None)


@case
def hf_llama_default(ctx):
    return hf_case(ctx, "hf_llama_default", {}, {"B": 2})


@case
def hf_llama_theta500k(ctx):
    return hf_case(ctx, "hf_llama_theta500k", {"frequency": {"scheme": "lang", "theta": 500000.0}},
                   {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})


@case
def hf_llama_explicit_positions(ctx):
    torch = ctx.torch
    pid = torch.tensor([[3, 0, 5, 5, 10, 1], [7, 8, 9, 10, 11, 12]], dtype=torch.int64)
    return hf_case(ctx, "hf_llama_explicit_positions", {}, {"positions": pid}, explicit=True)


@case
def hf_llama_gqa(ctx):
    return hf_case(ctx, "hf_llama_gqa", {}, {"n_heads": 4, "n_kv": 2, "S": 5})


@case
def hf_llama_bshd(ctx):
    return hf_case(ctx, "hf_llama_bshd", {}, {"layout": "bshd", "n_kv": 1, "S": 5},
                   peer=LLAMA_PEER + " with unsqueeze_dim=2 on [B,S,H,D]")


@case
def hf_llama_sbhd(ctx):
    return hf_case(ctx, "hf_llama_sbhd", {}, {"layout": "sbhd", "B": 2, "S": 4, "n_heads": 2, "n_kv": 1},
                   peer=LLAMA_PEER + " with cos/sin transposed to [S,B,D], unsqueeze_dim=2 on [S,B,H,D]")


@case
def hf_llama_thd_packed(ctx):
    torch = ctx.torch
    pid = torch.tensor([[0, 1, 2, 0, 1, 2, 3]], dtype=torch.int64)   # two packed sequences (3 + 4 tokens)
    return hf_case(ctx, "hf_llama_thd_packed", {}, {"layout": "thd", "positions": pid, "n_heads": 2, "n_kv": 1},
                   explicit=True,
                   peer=LLAMA_PEER + " on packed [T,H,D] (cos/sin of position_ids [1,T], unsqueeze_dim=1)")


@case
def hf_llama_linear(ctx):
    rp = {"rope_type": "linear", "factor": 2.5, "rope_theta": 10000.0}
    return hf_case(ctx, "hf_llama_linear", {"scaling": {"type": "linear", "factor": 2.5}},
                   {"rope_parameters": rp})


@case
def hf_llama_dynamic_above(ctx):
    torch = ctx.torch
    pid = torch.tensor([[0, 7, 19, 25, 33, 40]], dtype=torch.int64)   # seq_len = 41 > max_position_embeddings 16
    rp = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    return hf_case(ctx, "hf_llama_dynamic_above",
                   {"scaling": {"type": "dynamic", "factor": 2.0, "original_max_position": 16}},
                   {"rope_parameters": rp, "max_pos": 16, "positions": pid}, explicit=True, seq_len=True,
                   peer=LLAMA_PEER + "; fresh module, dynamic update at seq_len=max(position_ids)+1")


@case
def hf_llama_dynamic_below(ctx):
    rp = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    return hf_case(ctx, "hf_llama_dynamic_below",
                   {"scaling": {"type": "dynamic", "factor": 2.0, "original_max_position": 16}},
                   {"rope_parameters": rp, "max_pos": 16, "S": 6}, seq_len=True,
                   peer=LLAMA_PEER + "; fresh module, seq_len=max(position_ids)+1 <= max_position_embeddings")


YARN_RP = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0}


@case
def hf_llama_yarn(ctx):
    return hf_case(ctx, "hf_llama_yarn",
                   {"scaling": {"type": "yarn", "factor": 4.0, "original_max_position": 4096}},
                   {"rope_parameters": dict(YARN_RP), "max_pos": 16384})


@case
def hf_llama_yarn_no_truncate(ctx):
    rp = dict(YARN_RP, truncate=False)
    return hf_case(ctx, "hf_llama_yarn_no_truncate",
                   {"scaling": {"type": "yarn", "factor": 4.0, "original_max_position": 4096, "truncate": False}},
                   {"rope_parameters": rp, "max_pos": 16384})


@case
def hf_llama_yarn_attention_factor(ctx):
    rp = dict(YARN_RP, attention_factor=1.5, beta_fast=16.0, beta_slow=2.0)
    return hf_case(ctx, "hf_llama_yarn_attention_factor",
                   {"scaling": {"type": "yarn", "factor": 4.0, "original_max_position": 4096,
                                "beta_fast": 16.0, "beta_slow": 2.0, "attention_factor": 1.5}},
                   {"rope_parameters": rp, "max_pos": 16384})


@case
def hf_llama_yarn_mscale(ctx):
    # mscale/mscale_all_dim on a plain Llama module (half pairing): attention_factor = get_mscale(f,m)/get_mscale(f,mad)
    rp = dict(YARN_RP, mscale=1.0, mscale_all_dim=0.5)
    return hf_case(ctx, "hf_llama_yarn_mscale",
                   {"scaling": {"type": "yarn", "factor": 4.0, "original_max_position": 4096,
                                "mscale": 1.0, "mscale_all_dim": 0.5}},
                   {"rope_parameters": rp, "max_pos": 16384})


@case
def hf_llama_llama3(ctx):
    rp = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192, "rope_theta": 500000.0}
    return hf_case(ctx, "hf_llama_llama3",
                   {"frequency": {"scheme": "lang", "theta": 500000.0},
                    "scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position": 8192}},
                   {"rope_parameters": rp, "max_pos": 131072, "B": 2})


@case
def hf_llama_proportional(ctx):
    # rope_type 'proportional' (Gemma-4 style): first int(p*D//2) frequencies use exponent 2i/head_dim, the rest are 0,
    # and the rotation still pairs (i, i + head_dim/2) across the whole head.  Expressed with custom frequencies.
    rp = {"rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "factor": 2.0}
    r = hf_llama_run(ctx, "hf_llama_proportional", rope_parameters=rp)
    inv_unscaled = [10000.0 ** (-(2.0 * i) / 16) for i in range(4)] + [0.0] * 4
    # the spec carries the peer's un-divided float32 values so that custom/linear reproduces the peer exactly
    vals = [float(v) for v in (r["inv_freq"] * 2.0).tolist()]
    assert all(abs(a - b) <= 1e-6 * max(a, 1e-30) for a, b in zip(vals, inv_unscaled))
    spec = make_spec("hf_llama_proportional", 16, frequency={"scheme": "custom", "values": vals},
                     scaling={"type": "linear", "factor": 2.0})
    return record("hf_llama_proportional", hf_peer(ctx, LLAMA_PEER + " with rope_type='proportional'"), spec,
                  r["inv_freq"].tolist(), r["att"], q=r["q"], k=r["k"], out_q=r["out_q"], out_k=r["out_k"])


# ---------------- Hugging Face: Phi-3 LongRoPE ----------------

PHI3_TINY_SHORT = [1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0]
PHI3_TINY_LONG = [1.1, 1.3, 1.9, 3.0, 5.5, 9.0, 14.0, 20.0]


def phi3_run(ctx, name, pid, *, head_dim=16, n_heads=3, n_kv=1, max_pos=32, orig=8, short=None, long=None,
             q_needed=True, partial=1.0):
    torch = ctx.torch
    from transformers import Phi3Config
    from transformers.models.phi3 import modeling_phi3 as mp
    cfg = Phi3Config(hidden_size=head_dim * n_heads, num_attention_heads=n_heads, num_key_value_heads=n_kv,
                     max_position_embeddings=max_pos, original_max_position_embeddings=orig,
                     intermediate_size=32, num_hidden_layers=1, vocab_size=16, partial_rotary_factor=partial,
                     **rope_cfg_kwargs({"rope_type": "longrope", "rope_theta": 10000.0,
                                        "short_factor": list(short or PHI3_TINY_SHORT),
                                        "long_factor": list(long or PHI3_TINY_LONG)}))
    rot = mp.Phi3RotaryEmbedding(cfg)
    Bp, Sp = pid.shape
    cos, sin = rot(torch.zeros(Bp, Sp, head_dim), pid)
    out = {"inv_freq": rot.inv_freq.clone(), "att": rot.attention_scaling, "seq_len": int(pid.max()) + 1}
    if q_needed:
        q = randn(torch, (Bp, n_heads, Sp, head_dim), name, 1)
        k = randn(torch, (Bp, n_kv, Sp, head_dim), name, 2)
        oq, ok = mp.apply_rotary_pos_emb(q, k, cos, sin)
        out.update(q=q, k=k, out_q=oq, out_k=ok)
    return out


def phi3_case(ctx, name, pid, explicit):
    r = phi3_run(ctx, name, pid)
    spec = make_spec(name, 16, positions="explicit" if explicit else "implicit",
                     scaling={"type": "longrope", "short_factor": PHI3_TINY_SHORT, "long_factor": PHI3_TINY_LONG,
                              "factor": 4.0, "original_max_position": 8, "policy": "per_call"})
    return record(name, hf_peer(ctx, "Phi3RotaryEmbedding + apply_rotary_pos_emb (models.phi3.modeling_phi3); "
                                     "Phi3Config(max_position_embeddings=32, original_max_position_embeddings=8), "
                                     "rope_parameters without 'factor' (factor = 32/8)"),
                  spec, r["inv_freq"].tolist(), r["att"], seq_len=r["seq_len"], q=r["q"], k=r["k"],
                  out_q=r["out_q"], out_k=r["out_k"], positions=pid if explicit else None)


@case
def hf_phi3_longrope_short(ctx):
    torch = ctx.torch
    return phi3_case(ctx, "hf_phi3_longrope_short", pos_implicit(torch, 1, 8), False)   # seq_len 8 == original


@case
def hf_phi3_longrope_long(ctx):
    torch = ctx.torch
    pid = torch.tensor([[0, 3, 8, 9, 14, 20]], dtype=torch.int64)                       # seq_len 21 > 8
    return phi3_case(ctx, "hf_phi3_longrope_long", pid, True)


# ---------------- Hugging Face: GPT-NeoX partial rotary ----------------

@case
def hf_gpt_neox_partial(ctx):
    torch = ctx.torch
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox import modeling_gpt_neox as mn
    name = "hf_gpt_neox_partial"
    cfg = GPTNeoXConfig(hidden_size=96, num_attention_heads=3, rotary_pct=0.25, rotary_emb_base=10000,
                        max_position_embeddings=64, intermediate_size=32, num_hidden_layers=1, vocab_size=16)
    rot = mn.GPTNeoXRotaryEmbedding(cfg)
    pid = pos_implicit(torch, 1, 6)
    cos, sin = rot(torch.zeros(1, 6, 32), pid)          # cos/sin width = rotary_ndims = 8
    q = randn(torch, (1, 3, 6, 32), name, 1)
    k = randn(torch, (1, 3, 6, 32), name, 2)
    oq, ok = mn.apply_rotary_pos_emb(q, k, cos, sin)
    spec = make_spec(name, 32, rotary_dim=8)
    return record(name, hf_peer(ctx, "GPTNeoXRotaryEmbedding + apply_rotary_pos_emb (models.gpt_neox."
                                     "modeling_gpt_neox); rotary_pct=0.25, head 32"),
                  spec, rot.inv_freq.tolist(), rot.attention_scaling, q=q, k=k, out_q=oq, out_k=ok)


# ---------------- Hugging Face: GPT-J rotate_every_two ----------------

GPTJ_PEER = "create_sinusoidal_positions + apply_rotary_pos_emb/rotate_every_two (models.gptj.modeling_gptj), " \
            "rot/pass split as GPTJAttention does"


def gptj_rotate(ctx, rotary_dim, B, S):
    """GPTJAttention's rotation of [B,S,H,D] at positions arange(S): the first rotary_dim features rotate, the rest
    pass through (GPT-J rotates before the head permute)."""
    torch = ctx.torch
    from transformers.models.gptj import modeling_gptj as mj
    table = mj.create_sinusoidal_positions(64, rotary_dim)           # [max_pos, rotary_dim] = [sin | cos]
    sincos = table[pos_implicit(torch, B, S)]                         # the attention's gather
    sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
    return lambda x: torch.cat([mj.apply_rotary_pos_emb(x[..., :rotary_dim], sin, cos), x[..., rotary_dim:]], dim=-1)


@case
def hf_gptj_partial_interleaved(ctx):
    torch = ctx.torch
    name = "hf_gptj_partial_interleaved"
    head_dim, rotary_dim, H, B, S = 16, 8, 2, 2, 5
    rot = gptj_rotate(ctx, rotary_dim, B, S)
    q = randn(torch, (B, S, H, head_dim), name, 1)
    k = randn(torch, (B, S, H, head_dim), name, 2)
    inv = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64) / rotary_dim))  # as create_sinusoidal_positions
    spec = make_spec(name, head_dim, rotary_dim=rotary_dim, pairing="interleaved", layout="bshd")
    return record(name, hf_peer(ctx, GPTJ_PEER), spec, inv.tolist(), 1.0, q=q, k=k, out_q=rot(q), out_k=rot(k))


# ---------------- Hugging Face: DeepSeek V2 / V3 (MLA rope part) ----------------

def deepseek_cfg(ctx, cls_name, rp, *, nope=8, rope=16, n_heads=2, max_pos=163840, extra=None):
    import transformers
    cls = getattr(transformers, cls_name)
    kw = dict(hidden_size=32, num_attention_heads=n_heads, num_key_value_heads=n_heads, qk_nope_head_dim=nope,
              qk_rope_head_dim=rope, v_head_dim=8, kv_lora_rank=16, q_lora_rank=None,
              max_position_embeddings=max_pos, intermediate_size=32, num_hidden_layers=1, vocab_size=16,
              **rope_cfg_kwargs(rp))
    kw.update(extra or {})
    return cls(**kw)


DS_TINY_RP = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
              "beta_slow": 1, "rope_theta": 10000.0}


@case
def hf_deepseek_v2_yarn(ctx):
    torch = ctx.torch
    from transformers.models.deepseek_v2 import modeling_deepseek_v2 as md
    name = "hf_deepseek_v2_yarn"
    nope, rope, H, B, S = 8, 16, 2, 1, 6
    rp = dict(DS_TINY_RP, mscale=1.0, mscale_all_dim=0.8)
    cfg = deepseek_cfg(ctx, "DeepseekV2Config", rp, nope=nope, rope=rope, n_heads=H)
    rot = md.DeepseekV2RotaryEmbedding(cfg)
    pid = pos_implicit(torch, B, S)
    freqs_cis = rot(torch.zeros(B, S, rope), pid)                     # complex [B, S, rope/2], already * attention_scaling
    q = randn(torch, (B, H, S, nope + rope), name, 1)                 # [q_nope | q_pe] per head, as the attention splits
    k = randn(torch, (B, 1, S, nope + rope), name, 2)                 # shared single-head k: [k_nope | k_pe]
    q_pe, k_pe = md.apply_rotary_emb(q[..., nope:], k[..., nope:], freqs_cis)
    oq = torch.cat([q[..., :nope], q_pe], dim=-1)
    ok = torch.cat([k[..., :nope], k_pe], dim=-1)
    spec = make_spec(name, nope + rope, rotary_dim=rope, rotary_offset=nope, pairing="interleaved",
                     scaling={"type": "yarn", "factor": 40.0, "original_max_position": 4096, "beta_fast": 32,
                              "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.8})
    return record(name, hf_peer(ctx, "DeepseekV2RotaryEmbedding + apply_rotary_emb (complex, models.deepseek_v2."
                                     "modeling_deepseek_v2) on the qk_rope_head_dim tail; nope part passed through"),
                  spec, rot.inv_freq.tolist(), rot.attention_scaling, q=q, k=k, out_q=oq, out_k=ok)


DS_V3_RP = dict(DS_TINY_RP, mscale=0.707, mscale_all_dim=0.707)
DS_V3_PEER = "DeepseekV3RotaryEmbedding + apply_rotary_pos_emb_interleave (models.deepseek_v3.modeling_deepseek_v3, " \
             "rope_interleave=True) on the rope tail: reads (2i,2i+1) pairs, writes them de-interleaved to (i, i+rd/2)"


def deepseek_v3_rotate(ctx, nope, rope, H, B, S):
    """(module, rotate(q, k)): DeepSeek-V3's rotation of [B,H,S,nope+rope] heads at positions arange(S); the nope
    part passes through."""
    torch = ctx.torch
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as md
    cfg = deepseek_cfg(ctx, "DeepseekV3Config", DS_V3_RP, nope=nope, rope=rope, n_heads=H,
                       extra={"rope_interleave": True, "n_routed_experts": 2, "num_experts_per_tok": 1,
                              "moe_intermediate_size": 8})
    rot = md.DeepseekV3RotaryEmbedding(cfg)
    cos, sin = rot(torch.zeros(B, S, rope), pos_implicit(torch, B, S))

    def rotate(q, k):                                                 # [q_pass | q_rot]
        q_rot, k_rot = md.apply_rotary_pos_emb_interleave(q[..., nope:], k[..., nope:], cos, sin)
        return torch.cat([q[..., :nope], q_rot], dim=-1), torch.cat([k[..., :nope], k_rot], dim=-1)
    return rot, rotate


def deepseek_v3_spec(name, nope, rope):
    return make_spec(name, nope + rope, rotary_dim=rope, rotary_offset=nope, pairing="interleaved",
                     extra={"output_pairing": "half"},
                     scaling={"type": "yarn", "factor": 40.0, "original_max_position": 4096, "beta_fast": 32,
                              "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707})


@case
def hf_deepseek_v3_yarn_interleave(ctx):
    torch = ctx.torch
    name = "hf_deepseek_v3_yarn_interleave"
    nope, rope, H, B, S = 8, 16, 2, 1, 6
    rot, rotate = deepseek_v3_rotate(ctx, nope, rope, H, B, S)
    q = randn(torch, (B, H, S, nope + rope), name, 1)
    k = randn(torch, (B, 1, S, nope + rope), name, 2)                 # shared single-head k
    oq, ok = rotate(q, k)
    return record(name, hf_peer(ctx, DS_V3_PEER), deepseek_v3_spec(name, nope, rope), rot.inv_freq.tolist(),
                  rot.attention_scaling, q=q, k=k, out_q=oq, out_k=ok)


# ---------------- Hugging Face: RoFormer sinusoidal table ----------------

@case
def hf_roformer(ctx):
    torch, np = ctx.torch, ctx.np
    from transformers.models.roformer import modeling_roformer as mr
    name = "hf_roformer"
    D, H, B, S = 16, 2, 1, 6
    emb = mr.RoFormerSinusoidalPositionalEmbedding(64, D)
    with torch.no_grad():
        emb.weight.copy_(emb.create_weight())
    sinusoidal_pos = emb((B, S))[None, None, :, :]                    # [1, 1, S, D] = [sin(D/2) | cos(D/2)]
    q = randn(torch, (B, H, S, D), name, 1)
    k = randn(torch, (B, H, S, D), name, 2)
    oq, ok = mr.RoFormerSelfAttention.apply_rotary_position_embeddings(sinusoidal_pos, q, k)
    inv = [1.0 / np.power(10000, 2 * i / D) for i in range(D // 2)]   # RoFormer's table uses float64 angles
    spec = make_spec(name, D, pairing="interleaved")
    return record(name, hf_peer(ctx, "RoFormerSinusoidalPositionalEmbedding.create_weight + "
                                     "RoFormerSelfAttention.apply_rotary_position_embeddings (models.roformer); "
                                     "angles/sin/cos in float64, table stored as float32"),
                  spec, inv, 1.0, q=q, k=k, out_q=oq, out_k=ok)


# ---------------- Hugging Face: realistic configs, frequencies only ----------------

def freqs_only(ctx, name, peer, spec, inv, att, seq_len=None):
    return record(name, hf_peer(ctx, peer), spec, [float(v) for v in inv], att, seq_len=seq_len)


@case
def hf_freqs_llama2_7b_default(ctx):
    r = hf_llama_run(ctx, "x", head_dim=128, n_heads=32, max_pos=4096, q_needed=False)
    return freqs_only(ctx, "hf_freqs_llama2_7b_default", LLAMA_PEER + "; Llama-2-7B: head_dim 128, theta 1e4",
                      make_spec("hf_freqs_llama2_7b_default", 128), r["inv_freq"].tolist(), r["att"])


@case
def hf_freqs_linear_factor4(ctx):
    rp = {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}
    r = hf_llama_run(ctx, "x", head_dim=128, n_heads=32, max_pos=16384, rope_parameters=rp, q_needed=False)
    return freqs_only(ctx, "hf_freqs_linear_factor4", LLAMA_PEER + "; head_dim 128, linear factor 4",
                      make_spec("hf_freqs_linear_factor4", 128, scaling={"type": "linear", "factor": 4.0}),
                      r["inv_freq"].tolist(), r["att"])


@case
def hf_freqs_dynamic_llama2_seq8192(ctx):
    torch = ctx.torch
    rp = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    pid = torch.tensor([[8191]], dtype=torch.int64)
    r = hf_llama_run(ctx, "x", head_dim=128, n_heads=32, max_pos=4096, rope_parameters=rp, positions=pid,
                     q_needed=False)
    name = "hf_freqs_dynamic_llama2_seq8192"
    return freqs_only(ctx, name, LLAMA_PEER + "; head_dim 128, max_position_embeddings 4096, dynamic factor 2, "
                                              "one call with position_ids [[8191]]",
                      make_spec(name, 128, scaling={"type": "dynamic", "factor": 2.0, "original_max_position": 4096}),
                      r["inv_freq"].tolist(), r["att"], seq_len=r["seq_len"])


@case
def hf_freqs_llama31_8b_llama3(ctx):
    rp = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192, "rope_theta": 500000.0}
    r = hf_llama_run(ctx, "x", head_dim=128, n_heads=32, max_pos=131072, rope_parameters=rp, q_needed=False)
    name = "hf_freqs_llama31_8b_llama3"
    spec = make_spec(name, 128, frequency={"scheme": "lang", "theta": 500000.0},
                     scaling={"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position": 8192})
    return freqs_only(ctx, name, LLAMA_PEER + "; Llama-3.1-8B rope_scaling", spec, r["inv_freq"].tolist(), r["att"])


@case
def hf_freqs_qwen25_yarn(ctx):
    from transformers import Qwen2Config
    from transformers.models.qwen2 import modeling_qwen2 as mq
    rp = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1000000.0}
    cfg = Qwen2Config(hidden_size=3584, num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
                      intermediate_size=32, num_hidden_layers=1, vocab_size=16, **rope_cfg_kwargs(rp))
    rot = mq.Qwen2RotaryEmbedding(cfg)
    name = "hf_freqs_qwen25_yarn"
    spec = make_spec(name, 128, frequency={"scheme": "lang", "theta": 1000000.0},
                     scaling={"type": "yarn", "factor": 4.0, "original_max_position": 32768})
    return freqs_only(ctx, name, "Qwen2RotaryEmbedding (models.qwen2.modeling_qwen2); Qwen2.5-7B (hidden 3584, "
                                 "28 heads, theta 1e6) with the documented yarn factor 4 / original 32768",
                      spec, rot.inv_freq.tolist(), rot.attention_scaling)


def ds_freqs(ctx, name, cls_name, mscale, mad, peer):
    import importlib
    rp = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
          "beta_slow": 1, "mscale": mscale, "mscale_all_dim": mad, "rope_theta": 10000.0}
    extra = {"n_routed_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 8} if "V3" in cls_name else {}
    cfg = deepseek_cfg(ctx, cls_name, rp, nope=128, rope=64, n_heads=2, max_pos=163840, extra=extra)
    sub = "deepseek_v3" if "V3" in cls_name else "deepseek_v2"
    mod = importlib.import_module(f"transformers.models.{sub}.modeling_{sub}")
    rot = getattr(mod, cls_name.replace("Config", "RotaryEmbedding"))(cfg)
    spec = make_spec(name, 192, rotary_dim=64, rotary_offset=128, pairing="interleaved",
                     extra={"output_pairing": "half"} if "V3" in cls_name else None,
                     scaling={"type": "yarn", "factor": 40.0, "original_max_position": 4096, "beta_fast": 32,
                              "beta_slow": 1, "mscale": mscale, "mscale_all_dim": mad})
    return freqs_only(ctx, name, peer, spec, rot.inv_freq.tolist(), rot.attention_scaling)


@case
def hf_freqs_deepseek_v2_yarn(ctx):
    return ds_freqs(ctx, "hf_freqs_deepseek_v2_yarn", "DeepseekV2Config", 0.707, 0.707,
                    "DeepseekV2RotaryEmbedding; DeepSeek-V2 rope_scaling (qk_rope_head_dim 64, qk_nope_head_dim 128)")


@case
def hf_freqs_deepseek_v3_yarn(ctx):
    return ds_freqs(ctx, "hf_freqs_deepseek_v3_yarn", "DeepseekV3Config", 1.0, 1.0,
                    "DeepseekV3RotaryEmbedding; DeepSeek-V3 rope_scaling (qk_rope_head_dim 64, qk_nope_head_dim 128)")


# Phi-3.5-mini-instruct config.json rope_scaling, as quoted identically in two public GitHub sources
PHI35_LONG = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115,
    1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863,
    4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137,
    17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156,
    50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457,
    62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457,
    63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336,
    64.51000213623047, 64.52999877929688, 64.83999633789062]
PHI35_SHORT = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979, 1.0999999046325684,
    1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378,
    1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788,
    1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745, 2.0199997425079346,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756,
    2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533, 2.729999542236328,
    2.749999523162842, 2.8399994373321533]


def phi35_freqs(ctx, name, last_pos):
    torch = ctx.torch
    assert len(PHI35_LONG) == 48 and len(PHI35_SHORT) == 48
    pid = torch.tensor([[last_pos]], dtype=torch.int64)
    r = phi3_run(ctx, name, pid, head_dim=96, n_heads=32, n_kv=32, max_pos=131072, orig=4096,
                 short=PHI35_SHORT, long=PHI35_LONG, q_needed=False)
    spec = make_spec(name, 96, scaling={"type": "longrope", "short_factor": PHI35_SHORT, "long_factor": PHI35_LONG,
                                        "factor": 32.0, "original_max_position": 4096, "policy": "per_call"})
    return freqs_only(ctx, name, "Phi3RotaryEmbedding (models.phi3.modeling_phi3); Phi-3.5-mini-instruct "
                                 f"rope_scaling, one call with position_ids [[{last_pos}]]",
                      spec, r["inv_freq"].tolist(), r["att"], seq_len=r["seq_len"])


@case
def hf_freqs_phi35_mini_short(ctx):
    return phi35_freqs(ctx, "hf_freqs_phi35_mini_short", 4095)      # seq_len 4096 == original -> short


@case
def hf_freqs_phi35_mini_long(ctx):
    return phi35_freqs(ctx, "hf_freqs_phi35_mini_long", 4096)       # seq_len 4097 > original -> long


# ---------------- lucidrains rotary-embedding-torch ----------------

def lr_peer(ctx, what):
    return f"rotary-embedding-torch {ctx.ret_ver}: {what}"


def lr_case(ctx, name, ctor, spec_kw, *, head_dim=16, H=2, Hk=None, B=1, S=6, offset=0, bshd=False,
            xpos=False, effective_div=None):
    torch = ctx.torch
    RotaryEmbedding = ctx.ret.RotaryEmbedding
    rot = RotaryEmbedding(seq_before_head_dim=bshd, **ctor)
    Hk = Hk or H
    shp = (lambda h: (B, S, h, head_dim)) if bshd else (lambda h: (B, h, S, head_dim))
    q = randn(torch, shp(H), name, 1)
    k = randn(torch, shp(Hk), name, 2)
    if xpos:
        oq, ok = rot.rotate_queries_and_keys(q, k)
        call = "rotate_queries_and_keys"
    else:
        oq = rot.rotate_queries_or_keys(q, offset=offset)
        ok = rot.rotate_queries_or_keys(k, offset=offset)
        call = "rotate_queries_or_keys" + (f"(offset={offset})" if offset else "")
    inv = rot.freqs.detach().clone()
    if effective_div is not None:
        inv = inv / effective_div        # interpolate_factor divides positions; record the equivalent inv_freq
    args = ", ".join(f"{k2}={v!r}" for k2, v in ctor.items() if k2 != "custom_freqs")
    if "custom_freqs" in ctor:
        args = (args + ", " if args else "") + "custom_freqs=<values>"
    if bshd:
        args += ", seq_before_head_dim=True"
    spec = make_spec(name, head_dim, layout="bshd" if bshd else "bhsd", pairing="interleaved", **spec_kw)
    what = f"RotaryEmbedding({args}).{call}"
    if effective_div is not None:
        what += f"; inv_freq recorded as freqs/{effective_div!r} (the peer divides the positions instead)"
    return record(name, lr_peer(ctx, what), spec, inv.tolist(), 1.0,
                  seq_len=S if xpos else None, q=q, k=k, out_q=oq, out_k=ok, offset=offset if offset else None)


@case
def lr_lang(ctx):
    return lr_case(ctx, "lr_lang", {"dim": 16}, {}, B=2)


@case
def lr_lang_bshd_gqa(ctx):
    return lr_case(ctx, "lr_lang_bshd_gqa", {"dim": 16, "theta": 500}, {"frequency": {"scheme": "lang", "theta": 500.0}},
                   bshd=True, H=3, Hk=1, S=5)


@case
def lr_pixel(ctx):
    return lr_case(ctx, "lr_pixel", {"dim": 16, "freqs_for": "pixel", "max_freq": 10},
                   {"frequency": {"scheme": "pixel", "max_freq": 10.0}})


@case
def lr_constant(ctx):
    # num_freqs must be dim//2 here: with the default num_freqs=1 only 2 features rotate and the
    # module's freq cache (shape [cache_max_seq_len, dim]) cannot hold the [S, 2] result.
    return lr_case(ctx, "lr_constant", {"dim": 16, "freqs_for": "constant", "num_freqs": 8},
                   {"frequency": {"scheme": "constant", "value": 1.0}})


@case
def lr_custom(ctx):
    torch = ctx.torch
    vals = [1.5, 0.75, 0.3, 0.125, 0.05, 0.02, 0.007, 0.001]
    f32 = [float(v) for v in torch.tensor(vals, dtype=torch.float32).tolist()]
    return lr_case(ctx, "lr_custom", {"dim": 16, "custom_freqs": torch.tensor(vals, dtype=torch.float32)},
                   {"frequency": {"scheme": "custom", "values": f32}})


@case
def lr_xpos(ctx):
    return lr_case(ctx, "lr_xpos", {"dim": 16, "use_xpos": True, "xpos_scale_base": 8},
                   {"xpos": {"scale_base": 8}}, S=7, xpos=True)


@case
def lr_xpos_default_base(ctx):
    return lr_case(ctx, "lr_xpos_default_base", {"dim": 16, "use_xpos": True},
                   {"xpos": {"scale_base": 512}}, S=6, B=2, xpos=True)


@case
def lr_interpolate(ctx):
    return lr_case(ctx, "lr_interpolate", {"dim": 16, "interpolate_factor": 2.0},
                   {"scaling": {"type": "linear", "factor": 2.0}}, effective_div=2.0)


@case
def lr_theta_rescale(ctx):
    return lr_case(ctx, "lr_theta_rescale", {"dim": 16, "theta_rescale_factor": 2.0},
                   {"scaling": {"type": "ntk", "factor": 2.0}})


@case
def lr_offset(ctx):
    return lr_case(ctx, "lr_offset", {"dim": 16}, {}, offset=3)


@case
def lr_partial(ctx):
    # dim 8 < head_dim 16: features [0, 8) rotate (start_index 0), [8, 16) pass through
    return lr_case(ctx, "lr_partial", {"dim": 8}, {"rotary_dim": 8})


# ---------------- Meta LLaMA complex form (stand-in, from the published formula) ----------------

@case
def meta_llama_complex(ctx):
    torch = ctx.torch
    name = "meta_llama_complex"
    D, H, Hk, B, S, start_pos, theta = 16, 3, 1, 2, 5, 2, 10000.0

    def inv_freq_of(dim, theta):
        return 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))

    def precompute_freqs_cis(dim, end, theta):
        freqs = inv_freq_of(dim, theta)
        t = torch.arange(end, device=freqs.device, dtype=torch.float32)
        freqs = torch.outer(t, freqs)
        return torch.polar(torch.ones_like(freqs), freqs)

    inv = inv_freq_of(D, theta)
    freqs_cis_all = precompute_freqs_cis(D, 32, theta)
    freqs_cis = freqs_cis_all[start_pos: start_pos + S]               # [S, D/2], Meta's KV-cache slice

    def apply(x):                                                     # x: [B, S, H, D]
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        fc = freqs_cis.view(1, S, 1, D // 2)
        return torch.view_as_real(xc * fc).flatten(3).type_as(x)

    q = randn(torch, (B, S, H, D), name, 1)
    k = randn(torch, (B, S, Hk, D), name, 2)
    spec = make_spec(name, D, pairing="interleaved", layout="bshd")
    return record(name, "stand-in for Meta LLaMA model.py: precompute_freqs_cis + apply_rotary_emb (complex), "
                        f"freqs_cis[start_pos:start_pos+S] with start_pos={start_pos}, written in make_golden.py",
                  spec, inv.tolist(), 1.0, q=q, k=k, out_q=apply(q), out_k=apply(k), offset=start_pos)


# ---------------- User seed documents (/work/shared/seeds), reproduced inline ----------------

@case
def seed000_six_dim_five_tokens(ctx):
    """000: 5 tokens, 6-dim embeddings, theta 10000; halves (q1,q2,q3 | q4,q5,q6) paired (i, i+3);
    q = [0.5, 1.0, -0.5, 0.8, -1.2, 0.3] and k = [-0.7, 0.9, 0.4, -0.6, 1.1, -0.2] (the document's q_1 / k_3)
    placed at every one of the 5 positions.  The document's hand result for position 1 is
    q_1' ~ [-0.4031, 1.0546, -0.500644, 0.8530, -1.1523, 0.298924] (out_q row 1)."""
    torch = ctx.torch
    name = "seed000_six_dim_five_tokens"
    D, S, theta = 6, 5, 10000.0
    # The document lists omega_d = 1/theta^(d/D) for d = 0..5 but evaluates and uses only
    # [1, 0.0464, 0.00215] = theta^(-2i/D), i = 0..2 -- the standard frequencies, used here.
    omega = 1.0 / (theta ** (torch.arange(0, D // 2, dtype=torch.float32) * 2 / D))
    pos = torch.arange(S, dtype=torch.float32)
    ang = pos[:, None] * omega[None, :]                               # theta_i = omega * i, [S, 3]
    c, s = torch.cos(ang), torch.sin(ang)

    def rot(x):                                                       # x: [1, S, 1, 6]
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        cc, ss = c[None, :, None, :], s[None, :, None, :]
        return torch.cat([x1 * cc - x2 * ss, x1 * ss + x2 * cc], dim=-1)

    qv = torch.tensor([0.5, 1.0, -0.5, 0.8, -1.2, 0.3], dtype=torch.float32)
    kv = torch.tensor([-0.7, 0.9, 0.4, -0.6, 1.1, -0.2], dtype=torch.float32)
    q = qv.expand(1, S, 1, D).clone()
    k = kv.expand(1, S, 1, D).clone()
    oq, ok = rot(q), rot(k)
    hand = [-0.4031, 1.0546, -0.500644, 0.8530, -1.1523, 0.298924]
    assert max(abs(a - b) for a, b in zip(oq[0, 1, 0].tolist(), hand)) < 2e-4, oq[0, 1, 0]
    spec = make_spec(name, D, layout="bshd")
    return record(name, "seed 000 (user document): 6-dim, 5-token worked example, reproduced inline",
                  spec, omega.tolist(), 1.0, q=q, k=k, out_q=oq, out_k=ok)


@case
def seed001_build_rotary_frequencies(ctx):
    """001: build_rotary_frequencies(dim_head, max_seq_len, base) + apply_rope on [B,H,S,D], (even, odd) pairs."""
    torch = ctx.torch
    name = "seed001_build_rotary_frequencies"

    def build_rotary_frequencies(dim_head, max_seq_len, base=10000.0):
        half_dim = dim_head // 2
        theta = 1.0 / (base ** (torch.arange(0, half_dim).float() / half_dim))
        seq = torch.arange(max_seq_len).float()
        freqs = torch.einsum("s,d -> sd", seq, theta)
        return torch.cos(freqs)[None, None, :, :], torch.sin(freqs)[None, None, :, :], theta

    def apply_rope(x, cos, sin):
        B, H, S, D = x.shape
        x_ = x.view(B, H, S, D // 2, 2)
        xe, xo = x_[..., 0], x_[..., 1]
        return torch.stack([xe * cos - xo * sin, xe * sin + xo * cos], dim=-1).reshape(B, H, S, D)

    B, H, S, D = 2, 3, 7, 8
    cos, sin, theta = build_rotary_frequencies(D, S)
    q = randn(torch, (B, H, S, D), name, 1)
    k = randn(torch, (B, H, S, D), name, 2)
    spec = make_spec(name, D, pairing="interleaved")
    return record(name, "seed 001 (user document): build_rotary_frequencies + apply_rope, reproduced inline",
                  spec, theta.tolist(), 1.0, q=q, k=k, out_q=apply_rope(q, cos, sin), out_k=apply_rope(k, cos, sin))


@case
def seed003_head_dim4(ctx):
    """003: head_dim 4; cos/sin of (S, 2) concatenated twice to (S, 4) and used with rotate_half."""
    torch = ctx.torch
    name = "seed003_head_dim4"
    B, H, S, D = 1, 2, 5, 4
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.arange(S).float()[:, None] * inv_freq[None, :]      # (S, 2)
    cos_half, sin_half = freqs.cos(), freqs.sin()
    cos = torch.cat([cos_half, cos_half], dim=-1).unsqueeze(0)         # (1, S, 4)
    sin = torch.cat([sin_half, sin_half], dim=-1).unsqueeze(0)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat([-x2, x1], dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)                  # (1, 1, S, 4)
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    q = randn(torch, (B, H, S, D), name, 1)
    k = randn(torch, (B, H, S, D), name, 2)
    oq, ok = apply_rotary_pos_emb(q, k, cos, sin)
    spec = make_spec(name, D)
    return record(name, "seed 003 (user document): head_dim 4, cos/sin concatenated twice + rotate_half, "
                        "reproduced inline", spec, inv_freq.tolist(), 1.0, q=q, k=k, out_q=oq, out_k=ok)


# --------------------------------------------------------------------------------------
# Encodings cases: data/encodings/<case>.json -- multi-axis and run-time-frequency RoPE,
# RoPE backward, tables, sinusoidal, learned and ALiBi (format: SEMANTICS.md section 6).
# Each record holds the CLI's inputs and outputs by flag name.
# --------------------------------------------------------------------------------------

ENC_SUBDIR = "encodings/"
ENC_CASES = []


def enc_case(fn):
    ENC_CASES.append(fn)
    return fn


def tensor_json(t):
    """{"shape", "dtype", "data"}: int64 ids as ints; anything else is a float32 tensor of the CLI, its data the
    peer's values as exact float64 reprs (float32 values, or float64 where the peer computed in float64)."""
    t = t.detach().to("cpu")
    if t.dtype.is_floating_point:
        return {"shape": list(t.shape), "dtype": "float32", "data": flat(t)}
    assert str(t.dtype) == "torch.int64", t.dtype
    return {"shape": list(t.shape), "dtype": "int64", "data": [int(v) for v in t.reshape(-1).tolist()]}


def enc_record(name, peer, spec, command, inputs, outputs, **options):
    return {"case": name, "peer": peer, "spec": spec, "command": command,
            "inputs": {k: tensor_json(v) for k, v in inputs.items()},
            "options": {k: int(v) for k, v in options.items() if v is not None},
            "outputs": {k: tensor_json(v) for k, v in outputs.items()}}


def row_spec(name, encoding, dim, *, layout="bsd", positions="implicit", **keys):
    """Spec of an encoding added to rows of x (sinusoidal, learned)."""
    return {"name": name, "encoding": encoding, "dim": dim, **keys, "layout": layout, "dtype": "f32",
            "positions": positions}


def alibi_spec(name, num_heads, form):
    return {"name": name, "encoding": "alibi", "num_heads": num_heads, "form": form, "dtype": "f32"}


def axes_spec(name, head_dim, sections, *, interleaved=False, per_axis=False, **kw):
    axes = {"sections": list(sections)}
    if interleaved:
        axes["interleaved"] = True
    if per_axis:
        axes["per_axis_frequencies"] = True
    return make_spec(name, head_dim, positions="explicit", extra={"axes": axes}, **kw)


def vjp(torch, fn, primals, cotangents):
    """torch autograd: the gradients of sum_i(fn(*primals)[i] * cotangents[i]) with respect to each primal."""
    xs = [p.detach().clone().requires_grad_(True) for p in primals]
    torch.autograd.backward(list(fn(*xs)), list(cotangents))
    return [x.grad for x in xs]


def backward_record(ctx, name, peer, spec, rotate, q, k, inputs=None, **options):
    """A `backward` case: q/k carry upstream gradients (fresh randn), out_q/out_k are torch autograd's dL/dq, dL/dk
    through the peer's own rotate(q, k)."""
    torch = ctx.torch
    gq, gk = randn(torch, q.shape, name, 3), randn(torch, k.shape, name, 4)
    dq, dk = vjp(torch, rotate, [q, k], [gq, gk])
    return enc_record(name, peer, spec, "backward", dict(inputs or {}, q=gq, k=gk), {"out_q": dq, "out_k": dk},
                      **options)


# ---------------- Independent float64 evaluation of the encodings specs ----------------

def enc_inv_freq(spec, inputs, seq_len):
    """Per-pair inv_freq and attention factor of a rope spec: run-time values as given; per-axis frequencies computed
    for each axis as if rotary_dim were 2 * sections[a] (the index restarts in every axis); else the usual set."""
    if spec["frequency"]["scheme"] == "runtime":
        return list(inputs["freqs"]["data"]), 1.0
    inv, att = spec_inv_freq(spec, seq_len)
    axes = spec.get("axes") or {}
    if not axes.get("per_axis_frequencies"):
        return inv, att
    sets = [spec_inv_freq(dict(spec, rotary_dim=2 * k), seq_len)[0] for k in axes["sections"]]
    axis_of = pair_axes(spec)
    return [sets[a][axis_of[:r].count(a)] for r, a in enumerate(axis_of)], att


def sinusoidal_rows(np, spec, pos):
    """Sinusoidal table rows at positions pos [...] -> [..., dim]; angle(p, i) = p * base^(-2i/dim). interleaved:
    column 2i sin, 2i+1 cos; roformer: columns [0, ceil(dim/2)) sin(angle(p, c)), the rest cos(angle(p, c - ceil))."""
    dim, base = spec["dim"], float(spec.get("base", 10000.0))
    cols = np.arange(dim)
    if spec.get("table_form", "interleaved") == "interleaved":
        idx, is_sin = cols // 2, cols % 2 == 0
    else:
        h = (dim + 1) // 2
        idx, is_sin = np.where(cols < h, cols, cols - h), cols < h
    ang = pos[..., None].astype(np.float64) * base ** (-2.0 * idx / dim)
    return np.where(is_sin, np.sin(ang), np.cos(ang))


def alibi_slopes(n):
    """ALiBi slopes in closed form (BLOOM's construction; seed 002 builds the same recursively): 2^(-8(h+1)/c) for the
    first c = 2^floor(log2 n) heads, then the odd powers 1, 3, 5, ... of 2^(-4/c)."""
    c = 2 ** int(math.floor(math.log2(n)))
    return [2.0 ** (-8.0 * (h + 1) / c) if h < c else 2.0 ** (-4.0 * (2 * (h - c) + 1) / c) for h in range(n)]


def alibi_scores(np, spec, x, offset):
    """scores [B, H, Sq, Sk] plus the bias: query row r at i = offset + r, key j at j."""
    m = np.asarray(alibi_slopes(spec["num_heads"]))[:, None, None]
    i = (offset + np.arange(x.shape[2]))[:, None]
    j = np.arange(x.shape[3])[None, :]
    form = spec.get("form", "symmetric")
    if form == "bloom":
        return x + m * j
    if form == "symmetric":
        return x - m * np.abs(i - j)
    return np.where(j <= i, x - m * (i - j), x)                       # causal: j > i left unchanged


def enc_evaluate(np, rec, spec):
    """The spec's outputs for the case's inputs, in float64, from the spec alone."""
    ins, opts, command = rec["inputs"], rec["options"], rec["command"]

    def arr(name):
        return np.asarray(ins[name]["data"], dtype=np.float64).reshape(ins[name]["shape"])

    encoding = spec.get("encoding", "rope")
    if encoding == "alibi":
        if command == "table":
            return {"out": np.asarray(alibi_slopes(spec["num_heads"]))}
        return {"out": alibi_scores(np, spec, arr("x"), opts.get("offset", 0))}
    if encoding in ("sinusoidal", "learned"):
        if command == "table":
            pos = arr("positions").astype(np.int64) if "positions" in ins else np.arange(opts["max_pos"])
            return {"out": sinusoidal_rows(np, spec, pos)}
        x = arr("x")
        pos = position_grid(np, spec["layout"], x.shape, ins, opts, 1)[..., 0]
        rows = sinusoidal_rows(np, spec, pos) if encoding == "sinusoidal" else arr("table")[pos]
        return {"out": x + rows}
    n_axes = len(spec["axes"]["sections"]) if "axes" in spec else 1
    inv, att = enc_inv_freq(spec, ins, opts.get("seq_len"))
    if command == "table":
        pos = arr("positions") if "positions" in ins else np.arange(opts["max_pos"], dtype=np.float64)
        ang, k = rope_factors(np, spec, pos.reshape(-1, n_axes), inv, att, 1, None)
        return {"out": np.concatenate([np.cos(ang) * k, np.sin(ang) * k], axis=-1)}
    out, dfreq = {}, 0.0
    for which, sign in (("q", 1), ("k", -1)):
        if which not in ins:
            continue
        x = arr(which)
        pos = position_grid(np, spec["layout"], x.shape, ins, opts, n_axes)
        weight = arr(f"{which}_norm_weight") if f"{which}_norm_weight" in ins else None
        if command == "apply":
            if "qk_norm" in spec:
                x = qk_normed(np, spec, x, weight)
            out[f"out_{which}"] = spec_apply(np, spec, x, pos, inv, att, sign, opts.get("seq_len"))
            continue
        saved = arr(f"saved_{which}") if f"saved_{which}" in ins else None
        if "qk_norm" in spec:
            d_normed, _ = spec_backward(np, spec, x, None, pos, inv, att, sign, opts.get("seq_len"))
            out[f"out_{which}"], d_weight = qk_norm_backward(np, spec, saved, d_normed, weight)
            if weight is not None:
                out[f"out_{which}_norm_weight"] = d_weight
            continue
        out[f"out_{which}"], df = spec_backward(np, spec, x, saved, pos, inv, att, sign, opts.get("seq_len"))
        dfreq = dfreq + (df if df is not None else 0.0)
    if command == "backward" and spec["frequency"]["scheme"] == "runtime":
        out["out_freqs"] = dfreq
    return out


def enc_cross_check(np, rec, spec, tol):
    """Compare the peer's outputs with enc_evaluate; error relative to max(1, max |peer output|)."""
    want = enc_evaluate(np, rec, spec)
    if set(want) != set(rec["outputs"]):
        raise AssertionError(f"{rec['case']}: the spec yields {sorted(want)}, the peer {sorted(rec['outputs'])}")
    worst = 0.0
    for name, w in want.items():
        o = rec["outputs"][name]
        got = np.asarray(o["data"], dtype=np.float64).reshape(o["shape"])
        if got.shape != np.shape(w):
            raise AssertionError(f"{rec['case']}: {name} shape {list(got.shape)} vs spec {list(np.shape(w))}")
        err = float(np.max(np.abs(w - got))) / max(1.0, float(np.max(np.abs(got))))
        worst = max(worst, err)
        if err > tol:
            raise AssertionError(f"{rec['case']}: {name} differs from the spec evaluation by {err} (relative)")
    return f"out rel {worst:.1e}"


# ---------------- Multi-axis RoPE: Qwen2-VL / Qwen2.5-VL / Qwen3-VL text M-RoPE ----------------

QWEN_TEXT = {  # model -> (configuration class, rotary class)
    "qwen2_vl": ("Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding"),
    "qwen2_5_vl": ("Qwen2_5_VLTextConfig", "Qwen2_5_VLRotaryEmbedding"),
    "qwen3_vl": ("Qwen3VLTextConfig", "Qwen3VLTextRotaryEmbedding"),
}


def qwen_text_rotary(ctx, model, sections, head_dim, theta, n_heads=4, n_kv=2):
    """(modeling module, text rotary module) of a tiny Qwen-VL text config with mrope_section = sections."""
    import importlib
    mod = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    conf = importlib.import_module(f"transformers.models.{model}.configuration_{model}")
    cfg_cls, rot_cls = QWEN_TEXT[model]
    cfg = getattr(conf, cfg_cls)(hidden_size=head_dim * n_heads, num_attention_heads=n_heads,
                                 num_key_value_heads=n_kv, head_dim=head_dim, intermediate_size=32,
                                 num_hidden_layers=1, vocab_size=16, bos_token_id=None, eos_token_id=None,
                                 rope_parameters={"rope_type": "default", "rope_theta": theta,
                                                  "mrope_section": list(sections)})
    return mod, getattr(mod, rot_cls)(cfg)


def mrope_position_ids(torch):
    """[3, B=2, S=11] (t, h, w) ids laid out as Qwen2-VL's get_rope_index does: batch 0 = 3 text tokens, a 2x3 image
    grid (t fixed, h and w vary, starting at the text position), then text from max + 1; batch 1 = text from 4."""
    text, after = [0, 1, 2], [6, 7]
    grid = ([3] * 6, [3, 3, 3, 4, 4, 4], [3, 4, 5, 3, 4, 5])
    b0 = [text + g + after for g in grid]
    b1 = [list(range(4, 15))] * 3
    return torch.tensor([[b0[a], b1[a]] for a in range(3)], dtype=torch.int64)


def head_shape(layout, B, S, H, D):
    return {"bhsd": (B, H, S, D), "bshd": (B, S, H, D)}[layout]


def mrope_case(ctx, name, model, sections, *, head_dim, theta, interleaved=False, layout="bhsd", backward=False,
               what="apply_rotary_pos_emb with the module's M-RoPE cos/sin"):
    torch = ctx.torch
    mod, rot = qwen_text_rotary(ctx, model, sections, head_dim, theta)
    pid = mrope_position_ids(torch)
    _, B, S = pid.shape
    cos, sin = rot(torch.zeros(B, S, head_dim), pid)                 # [B, S, D], recomposed per mrope_section
    q = randn(torch, head_shape(layout, B, S, 4, head_dim), name, 1)
    k = randn(torch, head_shape(layout, B, S, 2, head_dim), name, 2)  # GQA

    def rotate(q, k):
        return mod.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1 if layout == "bhsd" else 2)
    spec = axes_spec(name, head_dim, sections, interleaved=interleaved, layout=layout,
                     frequency={"scheme": "lang", "theta": theta})
    peer = hf_peer(ctx, f"{QWEN_TEXT[model][1]} (models.{model}, mrope_section {list(sections)}) + {what}; "
                        "position_ids [3,B,S] given as positions [B,S,3]")
    inputs = {"positions": pid.permute(1, 2, 0)}
    if backward:
        return backward_record(ctx, name, peer, spec, rotate, q, k, inputs)
    oq, ok = rotate(q, k)
    return enc_record(name, peer, spec, "apply", dict(inputs, q=q, k=k), {"out_q": oq, "out_k": ok})


@enc_case
def hf_qwen2_vl_mrope(ctx):
    return mrope_case(ctx, "hf_qwen2_vl_mrope", "qwen2_vl", [2, 3, 3], head_dim=16, theta=1000000.0)


@enc_case
def hf_qwen2_5_vl_mrope_bshd(ctx):
    # Qwen2.5-VL's text rotary is Qwen2-VL's (same recomposition); run on [B,S,H,D] for the layout
    return mrope_case(ctx, "hf_qwen2_5_vl_mrope_bshd", "qwen2_5_vl", [2, 3, 3], head_dim=16, theta=1000000.0,
                      layout="bshd", what="apply_rotary_pos_emb(unsqueeze_dim=2) on [B,S,H,D]")


@enc_case
def hf_qwen3_vl_mrope_interleaved(ctx):
    # sections [24, 20, 20] of 64 pairs scaled to 16 pairs; the round robin gives h, w 5 pairs each, t the other 6
    return mrope_case(ctx, "hf_qwen3_vl_mrope_interleaved", "qwen3_vl", [6, 5, 5], head_dim=32, theta=5000000.0,
                      interleaved=True, what="apply_rotary_pos_emb; interleaved M-RoPE (apply_interleaved_mrope)")


@enc_case
def hf_qwen2_vl_mrope_backward(ctx):
    return mrope_case(ctx, "hf_qwen2_vl_mrope_backward", "qwen2_vl", [2, 3, 3], head_dim=16, theta=1000000.0,
                      backward=True, what="torch autograd through apply_rotary_pos_emb")


@enc_case
def hf_qwen2_vl_mrope_table(ctx):
    torch = ctx.torch
    name = "hf_qwen2_vl_mrope_table"
    D, sections = 16, [2, 3, 3]
    _, rot = qwen_text_rotary(ctx, "qwen2_vl", sections, D, 1000000.0)
    pid = mrope_position_ids(torch)[:, :1]                            # [3, 1, S]
    cos, sin = rot(torch.zeros(1, pid.shape[2], D), pid)
    table = torch.cat([cos[0, :, : D // 2], sin[0, :, : D // 2]], dim=-1)   # cos/sin are cat(f, f): one half each
    spec = axes_spec(name, D, sections, frequency={"scheme": "lang", "theta": 1000000.0})
    return enc_record(name, hf_peer(ctx, "Qwen2VLRotaryEmbedding (models.qwen2_vl) cos/sin at position_ids [3,1,S], "
                                         "first halves as [cos | sin]; positions [S,3]"),
                      spec, "table", {"positions": pid[:, 0].T}, {"out": table})


# ---------------- Multi-axis RoPE: Qwen2-VL vision, lucidrains axial, seed 002 2D ----------------

@enc_case
def hf_qwen2_vl_vision(ctx):
    torch = ctx.torch
    from transformers.models.qwen2_vl import configuration_qwen2_vl as cq, modeling_qwen2_vl as mq
    from transformers.vision_utils import get_vision_position_ids
    name = "hf_qwen2_vl_vision"
    D, H = 16, 2
    cfg = cq.Qwen2VLVisionConfig(embed_dim=D * H, num_heads=H, depth=1,
                                 rope_parameters={"rope_type": "axial", "rope_theta": 10000.0})
    rot = mq.Qwen2VLVisionRotaryEmbedding(cfg)                        # D/4 frequencies over D/2, shared by h and w
    ids = get_vision_position_ids(torch.tensor([[1, 4, 4], [2, 2, 4]]), 2)   # [T, 2] (h, w), 2x2 merge blocks
    cos, sin = rot(torch.zeros(1), ids)                               # [T, D] = [h | w | h | w]
    q = randn(torch, (ids.shape[0], H, D), name, 1)
    k = randn(torch, (ids.shape[0], H, D), name, 2)
    oq, ok = mq.apply_rotary_pos_emb_vision(q, k, cos, sin)
    spec = axes_spec(name, D, [D // 4, D // 4], per_axis=True, layout="thd")
    return enc_record(name, hf_peer(ctx, "Qwen2VLVisionRotaryEmbedding + get_vision_position_ids(grid_thw "
                                         "[[1,4,4],[2,2,4]], spatial_merge_size 2) + apply_rotary_pos_emb_vision "
                                         "(models.qwen2_vl) on packed [T,H,D]"),
                      spec, "apply", {"q": q, "k": k, "positions": ids}, {"out_q": oq, "out_k": ok})


@enc_case
def lr_axial_lang(ctx):
    # freqs_for='lang' only: with 'pixel', get_axial_freqs uses positions linspace(-1, 1, n) -- not integer ids, so
    # not expressible (SEMANTICS.md section 3).  Each axis gets the module's own dim/2 frequencies (per-axis restart).
    torch = ctx.torch
    from rotary_embedding_torch import apply_rotary_emb
    name = "lr_axial_lang"
    rot = ctx.ret.RotaryEmbedding(dim=8)
    Hh, Ww, B, heads, D = 3, 4, 2, 2, 24
    freqs = rot.get_axial_freqs(Hh, Ww).reshape(Hh * Ww, 1, 16)      # [h freqs | w freqs], each repeated twice
    q = randn(torch, (B, Hh * Ww, heads, D), name, 1)
    k = randn(torch, (B, Hh * Ww, heads, D), name, 2)
    ids = torch.stack(torch.meshgrid(torch.arange(Hh), torch.arange(Ww), indexing="ij"), dim=-1).reshape(-1, 2)
    spec = axes_spec(name, D, [4, 4], per_axis=True, rotary_dim=16, pairing="interleaved", layout="bshd")
    return enc_record(name, lr_peer(ctx, "RotaryEmbedding(dim=8).get_axial_freqs(3, 4) flattened to the H*W tokens + "
                                         "apply_rotary_emb on [B, H*W, heads, 24] (first 16 features rotate)"),
                      spec, "apply", {"q": q, "k": k, "positions": ids},
                      {"out_q": apply_rotary_emb(freqs, q), "out_k": apply_rotary_emb(freqs, k)})


def seed002_get_2d_rotary_pos_embed(torch, dim, height, width):
    """Seed 002's get_2d_rotary_pos_embed, verbatim."""
    assert dim % 4 == 0, "dim must be divisible by 4"
    y_pos = torch.arange(height).unsqueeze(1).repeat(1, width).flatten()
    x_pos = torch.arange(width).unsqueeze(0).repeat(height, 1).flatten()
    dim_quarter = dim // 4
    freqs = 1.0 / (10000 ** (torch.arange(0, dim_quarter, 2).float() / dim_quarter))
    x_angles = torch.outer(x_pos.float(), freqs)
    x_embed = torch.cat([x_angles.sin(), x_angles.cos()], dim=-1)
    y_angles = torch.outer(y_pos.float(), freqs)
    y_embed = torch.cat([y_angles.sin(), y_angles.cos()], dim=-1)
    return torch.cat([x_embed, y_embed], dim=-1)


@enc_case
def seed002_2d_rope_table(ctx):
    torch = ctx.torch
    name = "seed002_2d_rope_table"
    dim, Hh, Ww = 32, 3, 4
    pe = seed002_get_2d_rotary_pos_embed(torch, dim, Hh, Ww)         # [H*W, dim/2]: dim/8 frequencies per axis
    sx, cx, sy, cy = pe.split(dim // 8, dim=-1)
    table = torch.cat([cx, cy, sx, sy], dim=-1)                       # rope-gen: [cos of the pairs | sin of the pairs]
    ids = torch.stack([torch.arange(Hh * Ww) % Ww, torch.arange(Hh * Ww) // Ww], dim=-1)   # (x, y) per patch
    spec = axes_spec(name, dim // 2, [dim // 8, dim // 8], per_axis=True)
    return enc_record(name, "seed 002 (user document): get_2d_rotary_pos_embed(32, 3, 4), reproduced inline; it has "
                            "dim/8 frequencies per axis, so it returns dim/2 = 16 columns (not the dim its docstring "
                            "says) as [sin_x | cos_x | sin_y | cos_y], rearranged here to rope-gen's "
                            "[cos_x cos_y | sin_x sin_y]; positions (x, y)",
                      spec, "table", {"positions": ids}, {"out": table})


# ---------------- Run-time frequencies: lucidrains learned_freq=True ----------------

def lr_learned_freq_module(ctx, name):
    """RotaryEmbedding(dim=16, learned_freq=True) with its freqs moved off the init (as after training)."""
    torch = ctx.torch
    rot = ctx.ret.RotaryEmbedding(dim=16, learned_freq=True)
    with torch.no_grad():
        rot.freqs.mul_(1.0 + 0.1 * randn(torch, rot.freqs.shape, name, 5))
    return rot


LR_LEARNED_PEER = "RotaryEmbedding(dim=16, learned_freq=True), freqs perturbed by 10% randn, " \
                  "rotate_queries_or_keys(offset=3) on q and k"


@enc_case
def lr_learned_freq(ctx):
    torch = ctx.torch
    name = "lr_learned_freq"
    rot = lr_learned_freq_module(ctx, name)
    q = randn(torch, (1, 2, 6, 16), name, 1)
    k = randn(torch, (1, 1, 6, 16), name, 2)
    with torch.no_grad():
        oq, ok = rot.rotate_queries_or_keys(q, offset=3), rot.rotate_queries_or_keys(k, offset=3)
    spec = make_spec(name, 16, pairing="interleaved", frequency={"scheme": "runtime"})
    return enc_record(name, lr_peer(ctx, LR_LEARNED_PEER), spec, "apply",
                      {"q": q, "k": k, "freqs": rot.freqs}, {"out_q": oq, "out_k": ok}, offset=3)


@enc_case
def lr_learned_freq_backward(ctx):
    torch = ctx.torch
    name = "lr_learned_freq_backward"
    rot = lr_learned_freq_module(ctx, name)
    freqs = rot.freqs.detach().clone()
    q = randn(torch, (1, 2, 6, 16), name, 1)
    k = randn(torch, (1, 1, 6, 16), name, 2)
    def rotate(q, k):
        return rot.rotate_queries_or_keys(q, offset=3), rot.rotate_queries_or_keys(k, offset=3)
    rec = backward_record(ctx, name, lr_peer(ctx, LR_LEARNED_PEER + "; torch autograd, out_freqs = freqs.grad"),
                          make_spec(name, 16, pairing="interleaved", frequency={"scheme": "runtime"}), rotate,
                          q, k, {"freqs": freqs, "saved_q": q, "saved_k": k}, offset=3)
    rec["outputs"]["out_freqs"] = tensor_json(rot.freqs.grad)        # summed over the q and the k call
    return rec


# ---------------- RoPE backward: torch autograd through the peers ----------------

@enc_case
def hf_llama_yarn_backward(ctx):
    torch = ctx.torch
    from transformers.models.llama import modeling_llama as ml
    name = "hf_llama_yarn_backward"
    r = hf_llama_run(ctx, name, n_heads=4, n_kv=2, rope_parameters=dict(YARN_RP), max_pos=16384, q_needed=False)
    pid = r["pid"]
    cos, sin = r["rot"](torch.zeros(*pid.shape, 16), pid)
    q = randn(torch, (1, 4, pid.shape[1], 16), name, 1)
    k = randn(torch, (1, 2, pid.shape[1], 16), name, 2)
    spec = make_spec(name, 16, scaling={"type": "yarn", "factor": 4.0, "original_max_position": 4096})
    return backward_record(ctx, name, hf_peer(ctx, LLAMA_PEER + f" with yarn (attention factor "
                                                   f"{r['att']!r}); torch autograd"),
                           spec, lambda q, k: ml.apply_rotary_pos_emb(q, k, cos, sin), q, k)


def qk_norm_cases(ctx, name, model, *, backward):
    """HF's per-head q_norm / k_norm (Qwen3RMSNorm: w x; Gemma3RMSNorm: (1 + w) x, both over head_dim in float32)
    then apply_rotary_pos_emb, as Qwen3Attention and Gemma3Attention do: the forward, or torch autograd's dL/dq,
    dL/dk through both (the forward's q and k as saved_q, saved_k)."""
    torch = ctx.torch
    from transformers.models.llama import modeling_llama as ml
    if model == "qwen3":
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm as Norm
        peer, kind, scale = "Qwen3RMSNorm (models.qwen3.modeling_qwen3)", "rms", 0.5
    else:
        from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm as Norm
        peer, kind, scale = "Gemma3RMSNorm (models.gemma3.modeling_gemma3)", "rms_one_plus", 0.3
    head_dim, eps = 16, 1e-6
    r = hf_llama_run(ctx, name, head_dim=head_dim, n_heads=4, n_kv=2, S=7, q_needed=False)
    cos, sin = r["rot"](torch.zeros(*r["pid"].shape, head_dim), r["pid"])
    norms = []
    for i in (1, 2):
        norm = Norm(head_dim, eps=eps)
        with torch.no_grad():
            norm.weight.copy_(randn(torch, (head_dim,), name, 10 + i) * scale + (1.0 if kind == "rms" else 0.0))
        norms.append(norm)
    q = randn(torch, (1, 4, 7, head_dim), name, 1)
    k = randn(torch, (1, 2, 7, head_dim), name, 2)
    weights = {"q_norm_weight": norms[0].weight.detach(), "k_norm_weight": norms[1].weight.detach()}
    spec = make_spec(name, head_dim, extra={"qk_norm": {"type": kind, "eps": eps, "weight": "per_head"}})

    def rotate(q, k):
        return ml.apply_rotary_pos_emb(norms[0](q), norms[1](k), cos, sin)

    what = hf_peer(ctx, f"{peer} for q_norm and k_norm, then {LLAMA_PEER}")
    if backward:  # torch autograd: dL/dq, dL/dk and the norms' weight.grad
        gq, gk = randn(torch, q.shape, name, 3), randn(torch, k.shape, name, 4)
        xq, xk = q.clone().requires_grad_(True), k.clone().requires_grad_(True)
        torch.autograd.backward(list(rotate(xq, xk)), [gq, gk])
        return enc_record(name, what + "; torch autograd", spec, "backward",
                          dict(weights, q=gq, k=gk, saved_q=q, saved_k=k),
                          {"out_q": xq.grad, "out_k": xk.grad, "out_q_norm_weight": norms[0].weight.grad,
                           "out_k_norm_weight": norms[1].weight.grad})
    with torch.no_grad():
        oq, ok = rotate(q, k)
    return enc_record(name, what, spec, "apply", dict(weights, q=q, k=k), {"out_q": oq, "out_k": ok})


@enc_case
def hf_qwen3_qk_norm(ctx):
    return qk_norm_cases(ctx, "hf_qwen3_qk_norm", "qwen3", backward=False)


@enc_case
def hf_qwen3_qk_norm_backward(ctx):
    return qk_norm_cases(ctx, "hf_qwen3_qk_norm_backward", "qwen3", backward=True)


@enc_case
def hf_gemma3_qk_norm(ctx):
    return qk_norm_cases(ctx, "hf_gemma3_qk_norm", "gemma3", backward=False)


@enc_case
def hf_gemma3_qk_norm_backward(ctx):
    return qk_norm_cases(ctx, "hf_gemma3_qk_norm_backward", "gemma3", backward=True)


@enc_case
def hf_gptj_partial_backward(ctx):
    torch = ctx.torch
    name = "hf_gptj_partial_backward"
    head_dim, rotary_dim, H, B, S = 16, 8, 2, 2, 5
    rot = gptj_rotate(ctx, rotary_dim, B, S)
    q = randn(torch, (B, S, H, head_dim), name, 1)
    k = randn(torch, (B, S, H, head_dim), name, 2)
    spec = make_spec(name, head_dim, rotary_dim=rotary_dim, pairing="interleaved", layout="bshd")
    return backward_record(ctx, name, hf_peer(ctx, GPTJ_PEER + "; torch autograd"), spec,
                           lambda q, k: (rot(q), rot(k)), q, k)


@enc_case
def hf_deepseek_v3_interleave_backward(ctx):
    torch = ctx.torch
    name = "hf_deepseek_v3_interleave_backward"
    nope, rope, H, B, S = 8, 16, 2, 1, 6
    _, rotate = deepseek_v3_rotate(ctx, nope, rope, H, B, S)
    q = randn(torch, (B, H, S, nope + rope), name, 1)
    k = randn(torch, (B, 1, S, nope + rope), name, 2)
    return backward_record(ctx, name, hf_peer(ctx, DS_V3_PEER + "; torch autograd"),
                           deepseek_v3_spec(name, nope, rope), rotate, q, k)


@enc_case
def lr_xpos_backward(ctx):
    torch = ctx.torch
    name = "lr_xpos_backward"
    rot = ctx.ret.RotaryEmbedding(dim=16, use_xpos=True, xpos_scale_base=8)
    S = 7
    q = randn(torch, (1, 2, S, 16), name, 1)
    k = randn(torch, (1, 2, S, 16), name, 2)
    return backward_record(ctx, name, lr_peer(ctx, "RotaryEmbedding(dim=16, use_xpos=True, xpos_scale_base=8)."
                                                   "rotate_queries_and_keys; torch autograd"),
                           make_spec(name, 16, pairing="interleaved", xpos={"scale_base": 8}),
                           rot.rotate_queries_and_keys, q, k, seq_len=S)


# ---------------- ALiBi ----------------

def seed002_get_alibi_slopes(num_heads):
    """Seed 002's get_alibi_slopes, verbatim (float64)."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * (ratio ** i) for i in range(n)]

    if math.log2(num_heads).is_integer():
        return get_slopes_power_of_2(num_heads)
    closest_power = 2 ** math.floor(math.log2(num_heads))
    return (get_slopes_power_of_2(closest_power) +
            seed002_get_alibi_slopes(2 * closest_power)[0::2][:num_heads - closest_power])


def alibi_slopes_case(n):
    def fn(ctx):
        torch = ctx.torch
        from transformers.models.bloom import modeling_bloom as mb
        name = f"alibi_slopes_h{n}"
        slopes = torch.tensor(seed002_get_alibi_slopes(n), dtype=torch.float64)
        bloom = mb._get_alibi_slopes(n, "cpu").double()               # the same slopes, computed in float32
        assert torch.allclose(slopes, bloom, rtol=1e-6, atol=0), (slopes, bloom)
        return enc_record(name, "seed 002 (user document): get_alibi_slopes, reproduced inline (float64); equal to "
                                f"transformers {ctx.tf_ver} BLOOM _get_alibi_slopes to float32 rounding",
                          alibi_spec(name, n, "symmetric"), "table", {}, {"out": slopes})
    fn.__name__ = f"alibi_slopes_h{n}"
    return fn


for _n in (1, 2, 3, 5, 8, 12, 16, 24, 32, 40, 64):
    enc_case(alibi_slopes_case(_n))


def bloom_case(ctx, name, B, H, Sq, Sk, offset=None):
    torch = ctx.torch
    from transformers.models.bloom import modeling_bloom as mb
    x = randn(torch, (B, H, Sq, Sk), name, 1)
    alibi = mb.build_alibi_tensor(torch.ones(B, Sk, dtype=torch.int64), H, torch.float32).view(B, H, 1, Sk)
    return enc_record(name, hf_peer(ctx, "build_alibi_tensor (models.bloom) with an all-ones attention mask, added "
                                         "to the scores as BloomAttention's baddbmm does"),
                      alibi_spec(name, H, "bloom"), "apply", {"x": x}, {"out": x + alibi}, offset=offset)


@enc_case
def hf_bloom_alibi(ctx):
    return bloom_case(ctx, "hf_bloom_alibi", 2, 6, 5, 5)


@enc_case
def hf_bloom_alibi_decode(ctx):
    return bloom_case(ctx, "hf_bloom_alibi_decode", 1, 12, 2, 7, offset=5)


def seed_alibi_case(ctx, name, form, B, H, Sq, Sk, offset):
    """Seed 002's bias -m|i-j| (symmetric), or -m(i-j) on j <= i (causal; the rest left to the mask), with its
    slopes, in float64 and rounded once; query row r sits at i = offset + r."""
    torch = ctx.torch
    x = randn(torch, (B, H, Sq, Sk), name, 1)
    m = torch.tensor(seed002_get_alibi_slopes(H), dtype=torch.float64)[:, None, None]
    i = (offset + torch.arange(Sq, dtype=torch.float64))[:, None]
    j = torch.arange(Sk, dtype=torch.float64)[None, :]
    xd = x.double()
    out = xd - m * (i - j).abs() if form == "symmetric" else torch.where(j <= i, xd - m * (i - j), xd)
    return enc_record(name, f"seed 002 (user document): softmax(QK^T/sqrt(d) - m|i-j|) bias "
                            f"({'as written' if form == 'symmetric' else 'on j <= i only'}) with its get_alibi_slopes, "
                            f"written in make_golden.py; query rows at offset {offset} + r",
                      alibi_spec(name, H, form), "apply", {"x": x}, {"out": out.float()}, offset=offset or None)


@enc_case
def alibi_symmetric(ctx):
    return seed_alibi_case(ctx, "alibi_symmetric", "symmetric", 2, 8, 6, 6, 0)


@enc_case
def alibi_symmetric_offset5(ctx):
    return seed_alibi_case(ctx, "alibi_symmetric_offset5", "symmetric", 1, 5, 3, 8, 5)


@enc_case
def alibi_causal(ctx):
    return seed_alibi_case(ctx, "alibi_causal", "causal", 1, 12, 6, 6, 0)


@enc_case
def alibi_causal_offset5(ctx):
    return seed_alibi_case(ctx, "alibi_causal_offset5", "causal", 2, 3, 3, 8, 5)


# ---------------- Sinusoidal: seed 002, XLM (odd dim), RoFormer ----------------

def seed002_sinusoidal_positional_encoding(torch, max_len, d_model):
    """Seed 002's sinusoidal_positional_encoding, verbatim (even d_model only: pe[:, 1::2] has d/2 columns
    for d/2 + 1 frequencies when d is odd, a shape error)."""
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


SEED002_SIN_PEER = "seed 002 (user document): sinusoidal_positional_encoding(32, 16), reproduced inline"


def seed002_sinusoidal_case(ctx, name, shape, rows, *, layout="bsd", inputs=None, **options):
    """x + pe[positions]; rows(pe) gives the rows broadcast against x."""
    torch = ctx.torch
    pe = seed002_sinusoidal_positional_encoding(torch, 32, 16)
    x = randn(torch, shape, name, 1)
    positions = "explicit" if inputs and "positions" in inputs else "implicit"
    spec = row_spec(name, "sinusoidal", 16, base=10000.0, table_form="interleaved", layout=layout, positions=positions)
    return enc_record(name, SEED002_SIN_PEER + "; x + pe[positions]", spec, "apply", dict(inputs or {}, x=x),
                      {"out": x + rows(pe)}, **options)


@enc_case
def seed002_sinusoidal_bsd(ctx):
    return seed002_sinusoidal_case(ctx, "seed002_sinusoidal_bsd", (2, 6, 16), lambda pe: pe[:6])


@enc_case
def seed002_sinusoidal_sbd_offset(ctx):
    return seed002_sinusoidal_case(ctx, "seed002_sinusoidal_sbd_offset", (5, 2, 16), lambda pe: pe[3:8, None],
                                   layout="sbd", offset=3)


@enc_case
def seed002_sinusoidal_explicit(ctx):
    pid = ctx.torch.tensor([[0, 4, 9, 9, 31], [7, 3, 2, 1, 0]], dtype=ctx.torch.int64)
    return seed002_sinusoidal_case(ctx, "seed002_sinusoidal_explicit", (2, 5, 16), lambda pe: pe[pid],
                                   inputs={"positions": pid})


@enc_case
def seed002_sinusoidal_td_packed(ctx):
    torch = ctx.torch
    cu = torch.tensor([0, 3, 7], dtype=torch.int64)                    # two packed sequences: 3 + 4 tokens
    return seed002_sinusoidal_case(ctx, "seed002_sinusoidal_td_packed", (7, 16),
                                   lambda pe: pe[torch.tensor([0, 1, 2, 0, 1, 2, 3])], layout="td",
                                   inputs={"cu_seqlens": cu})


@enc_case
def seed002_sinusoidal_table(ctx):
    name = "seed002_sinusoidal_table"
    pe = seed002_sinusoidal_positional_encoding(ctx.torch, 32, 16)
    spec = row_spec(name, "sinusoidal", 16, base=10000.0, table_form="interleaved")
    return enc_record(name, SEED002_SIN_PEER + "; rows 0..19", spec, "table", {}, {"out": pe[:20]}, max_pos=20)


@enc_case
def hf_xlm_sinusoidal_odd(ctx):
    torch = ctx.torch
    from transformers.models.xlm import modeling_xlm as mx
    name = "hf_xlm_sinusoidal_odd"
    D, S, off = 15, 5, 4
    table = mx.create_sinusoidal_embeddings(32, D, torch.empty(32, D))   # float64 angles, stored float32
    x = randn(torch, (2, S, D), name, 1)
    spec = row_spec(name, "sinusoidal", D, base=10000.0, table_form="interleaved")
    return enc_record(name, hf_peer(ctx, "create_sinusoidal_embeddings(32, 15) (models.xlm; the interleaved table, "
                                         "odd dim: the last column is a sin); x + table[offset + arange(S)]"),
                      spec, "apply", {"x": x}, {"out": x + table[off: off + S]}, offset=off)


def roformer_table(ctx, n_pos, dim):
    from transformers.models.roformer import modeling_roformer as mr
    emb = mr.RoFormerSinusoidalPositionalEmbedding(n_pos, dim)
    with ctx.torch.no_grad():
        emb.weight.copy_(emb.create_weight())                         # what _init_weights does
    return emb


ROFORMER_SIN_PEER = "RoFormerSinusoidalPositionalEmbedding (models.roformer; float64 angles, table stored float32)"


@enc_case
def hf_roformer_sinusoidal(ctx):
    torch = ctx.torch
    name = "hf_roformer_sinusoidal"
    B, S, D, past = 2, 6, 16, 2
    emb = roformer_table(ctx, 64, D)
    x = randn(torch, (B, S, D), name, 1)
    spec = row_spec(name, "sinusoidal", D, base=10000.0, table_form="roformer")
    return enc_record(name, hf_peer(ctx, ROFORMER_SIN_PEER + f"; x + emb((B, S), past_key_values_length={past})"),
                      spec, "apply", {"x": x}, {"out": x + emb((B, S), past_key_values_length=past)}, offset=past)


@enc_case
def hf_roformer_sinusoidal_odd_sbd(ctx):
    torch = ctx.torch
    name = "hf_roformer_sinusoidal_odd_sbd"
    S, B, D = 5, 2, 15
    emb = roformer_table(ctx, 64, D)
    pid = torch.tensor([[0, 9], [1, 10], [2, 11], [40, 12], [63, 13]], dtype=torch.int64)   # [S, B]
    x = randn(torch, (S, B, D), name, 1)
    spec = row_spec(name, "sinusoidal", D, base=10000.0, table_form="roformer", layout="sbd", positions="explicit")
    return enc_record(name, hf_peer(ctx, ROFORMER_SIN_PEER + "; dim 15 (sin columns 0..7, cos 8..14); "
                                         "x + emb(position_ids=[S,B] ids) on [S,B,D]"),
                      spec, "apply", {"x": x, "positions": pid}, {"out": x + emb((B, S), position_ids=pid)})


@enc_case
def hf_roformer_sinusoidal_table(ctx):
    torch = ctx.torch
    name = "hf_roformer_sinusoidal_table"
    emb = roformer_table(ctx, 64, 15)
    pid = torch.tensor([0, 5, 9, 33, 2, 63], dtype=torch.int64)
    spec = row_spec(name, "sinusoidal", 15, base=10000.0, table_form="roformer", positions="explicit")
    return enc_record(name, hf_peer(ctx, ROFORMER_SIN_PEER + "; dim 15, rows at the given ids"),
                      spec, "table", {"positions": pid}, {"out": emb((1, 6), position_ids=pid)})


# ---------------- Learned (seed 002's nn.Embedding) ----------------

def seed002_learned(ctx, name, max_len, d_model):
    """Seed 002's LearnedPositionalEmbedding, verbatim, with its nn.Embedding weight drawn from a fixed seed."""
    torch = ctx.torch
    nn = torch.nn

    class LearnedPositionalEmbedding(nn.Module):
        def __init__(self, max_len, d_model):
            super().__init__()
            self.pe = nn.Embedding(max_len, d_model)

        def forward(self, x):
            seq_len = x.size(1)
            positions = torch.arange(seq_len, device=x.device)
            return x + self.pe(positions)

    m = LearnedPositionalEmbedding(max_len, d_model)
    with torch.no_grad():
        m.pe.weight.copy_(randn(torch, (max_len, d_model), name, 3))
    return m


SEED002_LEARNED_PEER = "seed 002 (user document): LearnedPositionalEmbedding(16, 8) (nn.Embedding), reproduced inline"


def learned_case(ctx, name, shape, add, *, layout="bsd", inputs=None, **options):
    """x + add(module, x): the seed's module or its nn.Embedding looked up at other positions."""
    torch = ctx.torch
    m = seed002_learned(ctx, name, 16, 8)
    x = randn(torch, shape, name, 1)
    positions = "explicit" if inputs and "positions" in inputs else "implicit"
    with torch.no_grad():
        out, what = add(m, x)
    return enc_record(name, SEED002_LEARNED_PEER + "; " + what,
                      row_spec(name, "learned", 8, layout=layout, positions=positions), "apply",
                      dict(inputs or {}, x=x, table=m.pe.weight), {"out": out}, **options)


@enc_case
def seed002_learned_bsd(ctx):
    return learned_case(ctx, "seed002_learned_bsd", (2, 5, 8), lambda m, x: (m(x), "its forward(x)"))


@enc_case
def seed002_learned_explicit(ctx):
    pid = ctx.torch.tensor([[3, 3, 0, 15, 7], [1, 2, 3, 4, 5]], dtype=ctx.torch.int64)
    return learned_case(ctx, "seed002_learned_explicit", (2, 5, 8),
                        lambda m, x: (x + m.pe(pid), "x + pe(position_ids [B,S])"), inputs={"positions": pid})


@enc_case
def seed002_learned_sbd_offset(ctx):
    torch = ctx.torch
    return learned_case(ctx, "seed002_learned_sbd_offset", (5, 2, 8),
                        lambda m, x: (x + m.pe(torch.arange(5) + 6)[:, None], "x + pe(6 + arange(S)) on [S,B,D]"),
                        layout="sbd", offset=6)


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------

def run(args):
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
    except Exception:
        pass
    logging.disable(logging.WARNING)
    ctx = Ctx()
    ctx.torch.set_num_threads(1)
    ctx.torch.manual_seed(0)
    import platform
    versions = {
        "torch": ctx.torch.__version__,
        "transformers": ctx.tf_ver,
        "rotary-embedding-torch": ctx.ret_ver,
        "numpy": ctx.np.__version__,
        "python": platform.python_version(),
    }
    out_dir = Path(args.out)
    produced = {}
    failures = 0
    for cases, subdir, check in ((CASES, "", check_rope_case), (ENC_CASES, ENC_SUBDIR, enc_cross_check)):
        for fn in cases:
            name = fn.__name__
            if args.only and not any(fnmatch.fnmatch(name, pat) for pat in args.only):
                continue
            rec = fn(ctx)
            assert rec["case"] == name, (rec["case"], name)
            spec = rec["spec"]
            rec["spec"] = spec_yaml(spec)
            try:
                note = check(ctx.np, rec, spec, tol=args.tol)
            except AssertionError as e:
                print(f"FAIL {name}: {e}", file=sys.stderr)
                failures += 1
                continue
            produced[f"{subdir}{name}.json"] = dump_record(rec)
            print(f"ok   {name:40s} {note}")
    produced["VERSIONS.json"] = json.dumps(versions, indent=2) + "\n"
    if failures:
        print(f"{failures} case(s) failed the spec cross-check; nothing written", file=sys.stderr)
        return 1
    if args.check:
        bad = 0
        for fname, text in produced.items():
            p = out_dir / fname
            if not p.exists() or p.read_text() != text:
                print(f"DRIFT {fname}", file=sys.stderr)
                bad += 1
        if not args.only:
            for x in sorted(set(written_files(out_dir)) - set(produced)):
                print(f"STALE {x}", file=sys.stderr)
                bad += 1
        print("check: " + ("OK" if not bad else f"{bad} difference(s)"))
        return 1 if bad else 0
    (out_dir / ENC_SUBDIR).mkdir(parents=True, exist_ok=True)
    for fname, text in produced.items():
        (out_dir / fname).write_text(text)
    if not args.only:
        for x in set(written_files(out_dir)) - set(produced):
            (out_dir / x).unlink()
    total = sum(len(t.encode()) for t in produced.values())
    print(f"wrote {len(produced)} files to {out_dir} ({total} bytes)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", nargs="?", const=str(DEFAULT_VENV), default=None,
                    help=f"create/reuse a venv (default {DEFAULT_VENV}), install the peers, re-run inside it")
    ap.add_argument("--pinned", action="store_true", help="with --venv: install the versions in data/VERSIONS.json")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (default tests/golden/data)")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    ap.add_argument("--only", action="append", help="glob of case names (repeatable)")
    ap.add_argument("--tol", type=float, default=1e-4, help="abs tolerance of the spec cross-check on outputs")
    args = ap.parse_args()
    if args.venv and not os.environ.get(IN_VENV_ENV):
        rest = []
        skip = False
        argv = sys.argv[1:]
        for i, a in enumerate(argv):
            if skip:
                skip = False
                continue
            if a == "--venv":
                if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                    skip = True
                continue
            if a.startswith("--venv=") or a == "--pinned":
                continue
            rest.append(a)
        bootstrap_venv(Path(args.venv), args.pinned, rest)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
