#!/usr/bin/env python3
"""The vision towers `rope-gen from-hf --vision` converts, and their golden cases, from HF's own vision rotary code
(the rotary module and the apply function its vision attention calls).

Per tower, measured by running that code: which key sizes the head (`size_key`, and whether `head_dim` comes first),
the pairing and the frequency layout (the angle of every pair at every patch of a grid, against the layouts the spec
can express: `per_axis` = each axis restarts theta^(-2j/(d/2)) over its d/4 pairs; `even_then_odd` = theta^(-2i/d),
even i on the first axis, odd i on the second), and the rope_type the config class defaults to. Written to
hf/hf_vision.json (embedded by the build). A tower whose layout is none of those stops the script.

Golden cases: random q at the grid's patch ids, in float32 and rerun in float64 (hf_model_table.float64_sticks).

Each case is the multimodal model's full default config (vision tower shrunk to 2 heads of 16 dims), q [1, S, 1, D]
(bshd), the ids rope-gen takes ([S, 2], in the spec's axis order), HF's float64 output and the tolerance
(2 x HF's float32 error + 1e-5 x max|q|). Writes tests/golden/data/hf_vision/<model_type>.json; `--check` exits 1
when the files differ. Run it with the Python of make_golden.py's venv (torch + transformers).
Per tower: the function that runs its code gives (run(q) on q [1, S, 1, D], ids [S, 2] in the spec's axis order,
the head size HF derives from a vision config, the HF code's names, what the ids are).
"""

import argparse
import copy
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from hf_model_table import Hf, float64_sticks, jsonable, seed_of  # noqa: E402

OUT = HERE / "data" / "hf_vision"
TABLE = HERE.parent.parent / "hf" / "hf_vision.json"
HEADS, HEAD = 2, 16
GRID = 4  # patches per side


def grid_ids(torch):
    """(h, w) of each patch of a GRID x GRID image, row major."""
    h = torch.arange(GRID).repeat_interleave(GRID)
    w = torch.arange(GRID).repeat(GRID)
    return torch.stack([h, w], dim=-1)


def qwen_axial(hf, mt, vcfg, q):
    """Qwen2-VL / 2.5-VL / 3-VL: <Model>VisionRotaryEmbedding(x, ids (N, 2) = (h, w)) + apply_rotary_pos_emb_vision
    on q [N, H, D]."""
    torch = hf.torch
    mod = hf.modeling(mt)
    rot_cls = next(c for n, c in vars(mod).items() if n.endswith("VisionRotaryEmbedding"))
    ids = grid_ids(torch)

    def run(q):
        cos, sin = rot_cls(vcfg)(q, ids)
        return mod.apply_rotary_pos_emb_vision(q[0], q[0], cos, sin)[0][None]
    return (run, ids, lambda c: 4 * rot_cls(c).inv_freq.numel(),
            f"{rot_cls.__name__} + apply_rotary_pos_emb_vision", "(h, w): the patch's row and column")


def pixtral(hf, mt, vcfg, q):
    """Pixtral (Mistral 3's tower): PixtralVisionRotaryEmbedding(x, ids (N, 2) = (h, w)) + apply_rotary_pos_emb
    (unsqueeze_dim=0) on q [B, H, N, D], as PixtralAttention calls it."""
    torch = hf.torch
    mod = hf.modeling("pixtral")
    ids = grid_ids(torch)

    def run(q):
        cos, sin = mod.PixtralVisionRotaryEmbedding(vcfg)(q, ids)
        x = q.transpose(1, 2)
        return mod.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)[0].transpose(1, 2)
    return (run, ids, lambda c: 2 * mod.PixtralVisionRotaryEmbedding(c).inv_freq.numel(),
            "PixtralVisionRotaryEmbedding + apply_rotary_pos_emb", "(h, w): the patch's row and column")


def llama4(hf, mt, vcfg, q):
    """Llama 4: Llama4VisionRotaryEmbedding's freqs_ci over the image_size / patch_size grid plus the CLS token
    (frequencies 0), vision_apply_rotary_emb on q [B, S, H, D]. rope-gen's ids: (column + 1, row + 1), CLS (0, 0)."""
    torch = hf.torch
    mod = hf.modeling("llama4")
    hw = grid_ids(torch)
    ids = torch.cat([torch.stack([hw[:, 1] + 1, hw[:, 0] + 1], dim=-1), torch.zeros(1, 2, dtype=torch.long)])

    def run(q):
        freqs_ci = mod.Llama4VisionRotaryEmbedding(vcfg).freqs_ci
        return mod.vision_apply_rotary_emb(q, q, freqs_ci)[0]
    return (run, ids, lambda c: 2 * mod.Llama4VisionRotaryEmbedding(c).freqs_ci.shape[-1],
            "Llama4VisionRotaryEmbedding + vision_apply_rotary_emb",
            "(column + 1, row + 1) of the patch in the image_size / patch_size grid; (0, 0) for the CLS token "
            "(HF gives it frequency 0)")


TOWERS = {"qwen2_vl": qwen_axial, "qwen2_5_vl": qwen_axial, "qwen3_vl": qwen_axial, "qwen3_vl_moe": qwen_axial,
          "mistral3": pixtral, "llama4": llama4}


def shrink(vcfg):
    """2 heads of HEAD dims, through the keys each tower reads; the Llama 4 grid GRID x GRID patches."""
    vcfg.num_attention_heads = HEADS
    if getattr(vcfg, "embed_dim", None):  # Qwen2-VL: head = embed_dim // heads
        vcfg.embed_dim = HEADS * HEAD
    else:
        vcfg.hidden_size = HEADS * HEAD
    if getattr(vcfg, "head_dim", None):  # Pixtral
        vcfg.head_dim = HEAD
    if getattr(vcfg, "image_size", None) and getattr(vcfg, "patch_size", None):
        vcfg.image_size = GRID * vcfg.patch_size


def size_keys(hf, mt, head_of):
    """Which key sizes the head: `head_dim` first (when HF reads it), then embed_dim or hidden_size // heads."""
    def head(**kw):
        c = copy.deepcopy(hf.config_class(mt)().vision_config)
        shrink(c)
        c.__dict__.update({"head_dim": None, **kw})  # past the strict dataclass: None where HF allows absence
        try:
            return head_of(c)
        except TypeError:  # None // heads: not the key this tower reads
            return None
    size_key = [k for k in ("embed_dim", "hidden_size") if head(**{"embed_dim": None, "hidden_size": None,
                                                                    k: HEADS * 24}) == 24]
    if len(size_key) != 1:
        raise SystemExit(f"{mt}: the head is sized by none or several of embed_dim, hidden_size")
    kw = {size_key[0]: HEADS * HEAD}
    return size_key[0], head(head_dim=8, **kw) == 8


def layout(hf, mt, run, ids, theta):
    """Pairing and frequency layout: each pair's angle at every patch, from unit vectors, against the layouts the
    spec expresses."""
    torch = hf.torch
    d, s = HEAD, ids.shape[0]
    eye = torch.eye(d, dtype=torch.float64)
    with float64_sticks(torch):
        # q[0, t, 0] = e_j for every token t: one run per input dim j
        images = torch.stack([run(eye[j].expand(1, s, 1, d).clone())[0, :, 0] for j in range(d)])  # [j, t, out]
    quarter = d // 4
    even_odd = [2 * i for i in range(d // 4)] + [2 * i + 1 for i in range(d // 4)]
    freqs = {"per_axis": [theta ** (-2.0 * (r % quarter) / (d / 2)) for r in range(d // 2)],
             "even_then_odd": [theta ** (-2.0 * i / d) for i in even_odd]}
    pairs = {"half": [(r, r + d // 2) for r in range(d // 2)], "interleaved": [(2 * r, 2 * r + 1) for r in range(d // 2)]}
    for pairing, dims in pairs.items():
        for name, f in freqs.items():
            want = torch.tensor([[f[r] * float(ids[t, r // quarter]) for r in range(d // 2)] for t in range(s)],
                                dtype=torch.float64)
            ok = all(torch.allclose(images[a, :, a], torch.cos(want[:, r]), atol=1e-9) and
                     torch.allclose(images[a, :, b], torch.sin(want[:, r]), atol=1e-9) and
                     torch.allclose(images[b, :, a], -torch.sin(want[:, r]), atol=1e-9)
                     for r, (a, b) in enumerate(dims))
            if ok:
                return pairing, name
    raise SystemExit(f"{mt}: HF's vision RoPE is none of the layouts the spec expresses; from-hf must refuse it")


def tower(hf, mt):
    """The table entry of one tower, measured."""
    full = hf.config_class(mt)()
    vcfg = full.vision_config
    shrink(vcfg)
    run, ids, head_of, code, ids_text = TOWERS[mt](hf, mt, vcfg, None)
    size_key, reads_head_dim = size_keys(hf, mt, head_of)
    pairing, frequencies = layout(hf, mt, run, ids, vcfg.rope_parameters["rope_theta"])
    return vcfg.model_type, {"model_type": mt, "hf_code": code, "size_key": size_key, "reads_head_dim": reads_head_dim,
                             "rope_type": vcfg.rope_parameters["rope_type"], "pairing": pairing,
                             "frequencies": frequencies, "ids": ids_text}


def case(hf, mt):
    torch = hf.torch
    full = hf.config_class(mt)()
    vcfg = full.vision_config
    shrink(vcfg)
    run, ids = TOWERS[mt](hf, mt, vcfg, None)[:2]
    g = torch.Generator().manual_seed(seed_of("vision/" + mt))
    q = torch.randn(1, ids.shape[0], 1, HEAD, generator=g, dtype=torch.float32)
    out32 = run(q)
    with float64_sticks(torch):
        out64 = run(q.double())
    err = float((out32.double() - out64).abs().max())
    return {"model_type": mt, "config": jsonable(full.to_dict()), "head_dim": HEAD,
            "ids": ids.tolist(), "q": [float(v) for v in q.reshape(-1).tolist()],
            "out_q": [float(v) for v in out64.reshape(-1).tolist()], "hf_float32_error": err,
            "tolerance": 2 * err + 1e-5 * float(q.abs().max())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files; exit 1 on a difference")
    args = ap.parse_args()
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    hf = Hf()
    files = {OUT / f"{mt}.json": json.dumps(case(hf, mt), separators=(",", ":"), sort_keys=True) + "\n"
             for mt in TOWERS}
    table = {"transformers": hf.tf.__version__, "torch": hf.torch.__version__,
             "generated_by": "tests/golden/hf_vision_cases.py", "towers": dict(tower(hf, mt) for mt in TOWERS)}
    files[TABLE] = json.dumps(table, indent=1, sort_keys=True) + "\n"
    bad = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in bad:
            print(f"DIFFERS {p.relative_to(HERE.parent.parent)}", file=sys.stderr)
        print("check: " + ("OK" if not bad else f"{len(bad)} difference(s)"))
        return 1 if bad else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for p, text in files.items():
        p.write_text(text)
    print(f"{len(TOWERS)} vision towers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
