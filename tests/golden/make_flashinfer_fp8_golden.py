#!/usr/bin/env python3
"""Golden RoPE + FP8 codes from FlashInfer's own reference functions.

FlashInfer ships pure-PyTorch references of its kernels in its wheel
(flashinfer/trace/templates/rope.py: `_rope_quantize_fp8_reference`, which
serves rope_quantize_fp8 and mla_rope_quantize_fp8, and
`_rope_quantize_fp8_append_paged_kv_cache_reference`). This script runs them,
unchanged, on CPU: it loads flashinfer.trace.templates.rope from the unpacked
wheel under stub parent packages, because `import flashinfer` itself needs
CUDA-only dependencies (tvm_ffi, cuda-python) that a CPU machine lacks; the
trace modules import only torch.

Where the references differ from FlashInfer's CUDA kernels (include/
flashinfer/pos_enc.cuh, RopeQuantizeKernel and RopeQuantizeAppendPagedKVCacheKernel),
rope-gen follows the kernels, and these cases avoid the difference:
- the reference rounds the rotated rope part to the input dtype before the
  scale and the conversion; the kernel converts its float32 value once. The
  cases' inputs are float32, where the two agree (rope-gen's op takes the
  spec's dtypes; a bf16 case would test the reference's extra rounding);
- the reference clamps to +-448 for either format; e4m3 only here;
- the paged reference stores each k head [nope | rope]; the kernel writes
  rope at 0 and nope after rope_dim. The paged cases have no nope part.

Writes data/flashinfer/rope_quantize_fp8.json: per case the inputs (float32
as uint32 bit patterns), pos_ids, scales and the reference's codes (uint8).

Usage (from the repository root; needs network once to fetch the wheel):
    python3 tests/golden/make_flashinfer_fp8_golden.py [--wheel FILE] [--check]
"""

import argparse
import importlib
import json
import sys
import tempfile
import types
import zipfile
from pathlib import Path

import torch

from golden_files import peer_wheel, write_or_check

VERSION = "0.7.2.post1"
OUT = Path(__file__).resolve().parent / "data" / "flashinfer" / "rope_quantize_fp8.json"


def load_reference(wheel, unpacked):
    """flashinfer.trace.templates.rope from the wheel, without running flashinfer/__init__.py."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(unpacked, [n for n in z.namelist() if n.startswith("flashinfer/trace/")])
    root = Path(unpacked) / "flashinfer"
    for name, path in (("flashinfer", root), ("flashinfer.trace", root / "trace"),
                       ("flashinfer.trace.templates", root / "trace" / "templates")):
        stub = types.ModuleType(name)
        stub.__path__ = [str(path)]
        sys.modules[name] = stub
    return importlib.import_module("flashinfer.trace.templates.rope")


def bits(t):
    return [int(b) & 0xFFFFFFFF for b in t.contiguous().view(torch.int32).reshape(-1).tolist()]


def codes(t):
    return t.contiguous().view(torch.uint8).reshape(-1).tolist()


def cos_sin_cache(max_pos, rope_dim):
    angles = torch.arange(max_pos, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(rope_dim // 2, dtype=torch.float64) * 2 / rope_dim)
    return torch.cat([angles.cos(), angles.sin()], -1).float()


def quantize_cases(ref):
    """GQA with nope parts, MLA (2-D k), both pairings, scales that are no powers of two, saturation."""
    out = []
    for name, nnz, hq, hk, rope_dim, nope_dim, is_neox, sq, skv, spread in [
            ("gqa_neox", 5, 4, 2, 32, 16, True, 37.3, 0.61, 1.0),
            ("gqa_interleaved_saturating", 4, 3, 1, 16, 8, False, 300.0, 0.037, 2.0),
            ("mla", 6, 4, None, 32, 64, False, 1.7, 3.3, 1.0)]:
        gen = torch.Generator().manual_seed(len(out) + 11)
        k_heads = () if hk is None else (hk,)
        q_rope = torch.randn(nnz, hq, rope_dim, generator=gen) * spread
        k_rope = torch.randn(nnz, *k_heads, rope_dim, generator=gen) * spread
        q_nope = torch.randn(nnz, hq, nope_dim, generator=gen) * spread
        k_nope = torch.randn(nnz, *k_heads, nope_dim, generator=gen) * spread
        cache = cos_sin_cache(64, rope_dim)
        pos_ids = torch.randint(0, 64, (nnz,), generator=gen, dtype=torch.int32)
        outs = ref._rope_quantize_fp8_reference(q_rope, k_rope, q_nope, k_nope, cache, pos_ids, is_neox=is_neox,
                                                quantize_dtype=torch.float8_e4m3fn, quant_scale_q=sq,
                                                quant_scale_kv=skv)
        out.append({"name": name, "is_neox": is_neox, "quant_scale_q": sq, "quant_scale_kv": skv,
                    "shapes": {"q_rope": list(q_rope.shape), "k_rope": list(k_rope.shape),
                               "q_nope": list(q_nope.shape), "k_nope": list(k_nope.shape),
                               "cos_sin_cache": list(cache.shape)},
                    "q_rope": bits(q_rope), "k_rope": bits(k_rope), "q_nope": bits(q_nope), "k_nope": bits(k_nope),
                    "cos_sin_cache": bits(cache), "pos_ids": pos_ids.tolist(),
                    "codes": dict(zip(["q_rope_out", "k_rope_out", "q_nope_out", "k_nope_out"], map(codes, outs)))})
    return out


def paged_cases(ref):
    """GQA appends into NHD and HND pages: q codes, and k, v codes in the caches (untouched entries zero)."""
    out = []
    for layout in ("NHD", "HND"):
        gen = torch.Generator().manual_seed(31 + len(out))
        nnz, hq, hk, d, page_size, pages = 6, 4, 2, 32, 4, 5
        q_rope = torch.randn(nnz, hq, d, generator=gen)
        k_rope = torch.randn(nnz, hk, d, generator=gen)
        v = torch.randn(nnz, hk, d, generator=gen)
        cache = cos_sin_cache(64, d)
        pos_ids = torch.randint(0, 64, (nnz,), generator=gen, dtype=torch.int32)
        # Two requests: 4 new tokens after 3 cached, 2 after 0; pages [3, 0] and [4].
        kv_indices = torch.tensor([3, 0, 4], dtype=torch.int32)
        kv_indptr = torch.tensor([0, 2, 3], dtype=torch.int32)
        batch_indices = torch.tensor([0, 0, 0, 0, 1, 1], dtype=torch.int32)
        positions = torch.tensor([3, 4, 5, 6, 0, 1], dtype=torch.int32)
        shape = (pages, page_size, hk, d) if layout == "NHD" else (pages, hk, page_size, d)
        k_cache = torch.zeros(shape, dtype=torch.float8_e4m3fn)
        v_cache = torch.zeros(shape, dtype=torch.float8_e4m3fn)
        q_out, _ = ref._rope_quantize_fp8_append_paged_kv_cache_reference(
            q_rope, k_rope, None, None, v, cache, pos_ids, (k_cache, v_cache), kv_indices, kv_indptr, batch_indices,
            positions, is_neox=True, quantize_dtype=torch.float8_e4m3fn, quant_scale_q=5.3, quant_scale_kv=0.77,
            page_size=page_size, kv_layout=layout)
        out.append({"name": f"paged_{layout.lower()}", "kv_layout": layout, "page_size": page_size,
                    "quant_scale_q": 5.3, "quant_scale_kv": 0.77,
                    "shapes": {"q_rope": list(q_rope.shape), "k_rope": list(k_rope.shape), "v": list(v.shape),
                               "cache": list(shape), "cos_sin_cache": list(cache.shape)},
                    "q_rope": bits(q_rope), "k_rope": bits(k_rope), "v": bits(v), "cos_sin_cache": bits(cache),
                    "pos_ids": pos_ids.tolist(), "kv_indices": kv_indices.tolist(), "kv_indptr": kv_indptr.tolist(),
                    "batch_indices": batch_indices.tolist(), "positions": positions.tolist(),
                    "codes": {"q_rope_out": codes(q_out), "k_cache": codes(k_cache), "v_cache": codes(v_cache)}})
    return out


def build(wheel):
    with tempfile.TemporaryDirectory() as unpacked:
        ref = load_reference(wheel, unpacked)
        doc = {"peer": f"flashinfer-python {VERSION}: flashinfer/trace/templates/rope.py reference functions, "
                       f"torch {torch.__version__}",
               "rope_quantize_fp8": quantize_cases(ref), "rope_quantize_fp8_append_paged_kv_cache": paged_cases(ref)}
    return json.dumps(doc, separators=(",", ":")) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel", help=f"flashinfer_python-{VERSION} wheel (default: pip download it)")
    ap.add_argument("--check", action="store_true", help="compare with the committed file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = build(peer_wheel(f"flashinfer-python=={VERSION}", a.wheel, tmp))
    return write_or_check(OUT, text, "flashinfer fp8 golden", a.check)


if __name__ == "__main__":
    sys.exit(main())
