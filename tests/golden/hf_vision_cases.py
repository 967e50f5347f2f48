#!/usr/bin/env python3
"""Golden cases for `rope-gen from-hf --vision`: HF's own vision rotary code (the rotary module and the apply
function its vision attention calls) on random q at (h, w) patch ids of a small grid, in float32 and rerun in
float64 (hf_model_table.float64_sticks), for every vision tower from-hf converts.

Each case is the multimodal model's full default config (vision tower shrunk to 2 heads of 16 dims), q [1, S, 1, D]
(bshd), the ids rope-gen takes ([S, 2], in the spec's axis order), HF's float64 output and the tolerance
(2 x HF's float32 error + 1e-5 x max|q|). Writes tests/golden/data/hf_vision/<model_type>.json; `--check` exits 1
when the files differ. Run it with the Python of make_golden.py's venv (torch + transformers).
"""

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from hf_model_table import Hf, float64_sticks, jsonable, seed_of  # noqa: E402

OUT = HERE / "data" / "hf_vision"
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
    return run, ids


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
    return run, ids


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
    return run, ids


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


def case(hf, mt):
    torch = hf.torch
    full = hf.config_class(mt)()
    vcfg = full.vision_config
    shrink(vcfg)
    run, ids = TOWERS[mt](hf, mt, vcfg, None)
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
    bad = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in bad:
            print(f"DIFFERS {p.relative_to(HERE.parent.parent)}", file=sys.stderr)
        return 1 if bad else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for p, text in files.items():
        p.write_text(text)
    print(f"{len(files)} vision towers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
