#!/usr/bin/env python3
"""The GPU kit's PyTorch side: the bench shapes through PyTorch on CUDA, each
side as a ratio to torch's own copy_ of the same bytes in the same process.

Sides, rotating q [B, S, 32, 128] and k [B, S, 8, 128] (bshd; viewed as HF's
[B, H, S, D]) or q [T, 32, 128], k [T, 8, 128] (thd), out of place:
  copy_        q_out.copy_(q), k_out.copy_(k): the yardstick (bytes read + written)
  hf_eager     cos/sin from inv_freq and position ids per call (LlamaRotaryEmbedding),
               then apply_rotary_pos_emb (rotate_half)
  hf_table     cos/sin rows gathered from a table computed once, then the same apply
  hf_compile   torch.compile (Inductor) of hf_eager's function
Timing: CUDA events around each call, L2 flushed (256 MiB written) before
each, median of --reps; ratio = copy_ time / side time (>= 1: as fast as a copy).
"""
import argparse
import json
import math


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--json", help="write the rows as JSON to this file")
    a = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("PyTorch sees no CUDA device: PyTorch's side is skipped (no CUDA kernel ran).")
        return 0
    dev = torch.device("cuda")
    # llama3 (Llama 3.1 8B): theta 500000, factor 8 over 8192, low/high freq factors 1/4.
    base, dim = 500000.0, 128
    inv = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    wavelen = 2 * math.pi / inv
    low, high = 8192 / 1.0, 8192 / 4.0
    smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
    scaled = torch.where(wavelen > low, inv / 8, inv)
    mid = (wavelen <= low) & (wavelen >= high)
    inv_freq = torch.where(mid, (1 - smooth) * inv / 8 + smooth * inv, scaled).float().to(dev)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def cos_sin(position_ids, dtype):  # [N, S] ids -> [N, S, D]
        freqs = position_ids[..., None].float() * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def apply(q, k, cos, sin):  # q [.., S, H, D] with cos [.., S, D]: unsqueeze at the heads
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def hf_eager(q, k, position_ids):
        cos, sin = cos_sin(position_ids, q.dtype)
        return apply(q, k, cos, sin)

    table_cos, table_sin = cos_sin(torch.arange(65536, device=dev), torch.bfloat16)

    def hf_table(q, k, position_ids):
        return apply(q, k, table_cos[position_ids].to(q.dtype), table_sin[position_ids].to(q.dtype))

    compiled = None if a.no_compile else torch.compile(hf_eager, dynamic=False)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)

    def median_ms(fn):
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.reps):
            flush.zero_()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        times.sort()
        return times[len(times) // 2]

    print(f"\nPyTorch {torch.__version__} on {torch.cuda.get_device_name()}: ratio = copy_ time / side time (same bytes, same run)\n")
    print("| case | tokens | side | us | GB/s | ratio |")
    print("|---|---|---|---|---|---|")
    rows = []
    for layout, dtype in (("bshd", torch.bfloat16), ("thd", torch.bfloat16), ("bshd", torch.float32)):
        for tokens in (1, 64, 512, 8192, 32768) if dtype == torch.bfloat16 else (8192,):
            decode = tokens <= 64
            lead = (tokens,) if layout == "thd" else ((tokens, 1) if decode else (1, tokens))
            g = torch.Generator(device=dev).manual_seed(0)
            q = torch.randn(*lead, 32, 128, generator=g, device=dev).to(dtype)
            k = torch.randn(*lead, 8, 128, generator=g, device=dev).to(dtype)
            ids = (torch.full(lead, 4096, device=dev) if decode else torch.arange(tokens, device=dev).reshape(lead))
            if layout == "thd":
                ids = ids.reshape(tokens, 1)
                q3, k3 = q.unsqueeze(1), k.unsqueeze(1)  # [T, 1, H, D]: one token per row of ids
            else:
                q3, k3 = q, k
            q_out, k_out = torch.empty_like(q), torch.empty_like(k)
            nbytes = 2 * (q.numel() + k.numel()) * q.element_size()
            copy_ms = median_ms(lambda: (q_out.copy_(q), k_out.copy_(k)))
            sides = [("copy_", copy_ms), ("hf_eager", median_ms(lambda: hf_eager(q3, k3, ids))),
                     ("hf_table", median_ms(lambda: hf_table(q3, k3, ids)))]
            if compiled is not None:
                sides.append(("hf_compile", median_ms(lambda: compiled(q3, k3, ids))))
            for side, ms in sides:
                ratio = copy_ms / ms
                label = f"llama3 {layout} {str(dtype).replace('torch.', '')}"
                print(f"| {label} | {tokens} | {side} | {ms * 1e3:.1f} | {nbytes / ms / 1e6:.0f} | {ratio:.2f} |")
                rows.append({"case": label, "tokens": tokens, "side": side, "us": ms * 1e3, "gbs": nbytes / ms / 1e6, "ratio": ratio})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
