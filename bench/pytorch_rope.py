#!/usr/bin/env python3
"""PyTorch eager RoPE (HF's rotate_half formula) timed on the shapes rope-gen
bench uses, for the README's comparison. Needs torch (tests/golden's venv has
it: tests/golden/make_golden.py --venv). Prints one JSON line per shape.

Two timings: "apply" (q * cos + rotate_half(q) * sin with cos/sin precomputed,
the per-layer cost in HF) and "full" (cos/sin from inv_freq and positions too,
as LlamaRotaryEmbedding.forward + apply_rotary_pos_emb do per call).
"""
import argparse
import json
import statistics
import time

import torch


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def cos_sin(inv_freq, positions, dtype):
    freqs = positions[..., None].float() * inv_freq  # [B, S, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def median_seconds(fn, min_seconds=0.5):
    for _ in range(3):
        fn()
    times, start = [], time.perf_counter()
    while len(times) < 10 or (time.perf_counter() - start < min_seconds and len(times) < 10000):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shape", required=True, help="B,S,H (bshd)")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    b, s, h = (int(x) for x in a.shape.split(","))
    d = a.head_dim
    dtype = torch.float32 if a.dtype == "f32" else torch.bfloat16
    q = torch.randn(b, s, h, d, dtype=dtype)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    positions = torch.arange(s)[None].expand(b, s)
    cos, sin = cos_sin(inv_freq, positions, dtype)
    cos, sin = cos[:, :, None], sin[:, :, None]  # bshd: broadcast over heads

    def apply():
        return q * cos + rotate_half(q) * sin

    def full():
        c, s_ = cos_sin(inv_freq, positions, dtype)
        return q * c[:, :, None] + rotate_half(q) * s_[:, :, None]

    moved = 2 * q.numel() * q.element_size()
    out = {"shape": [b, s, h], "dtype": a.dtype, "threads": a.threads, "torch": torch.__version__}
    for name, fn in (("apply", apply), ("full", full)):
        t = median_seconds(fn)
        out[f"{name}_us"] = t * 1e6
        out[f"{name}_gbps"] = moved / t / 1e9
    print(json.dumps(out))


if __name__ == "__main__":
    main()
