"""q/k rotation error by position, up to 32k: vLLM's CPU kernel on its cos/sin
cache in the model's dtype, and rope-gen's computing kernel serving the same
layer, both against a float64 rotation of the same inputs with the angles
computed in float64 from the layer's formula (written out here, apart from
both); bf16 models, and float32 ones (where vLLM's float32 angles p * inv_freq
lose digits as p grows).

    python bf16_accuracy.py        # prints the markdown table of docs/vllm.md
"""
import math

import torch
import vllm.model_executor.layers.rotary_embedding as rotary

from ropegen.vllm.layers import served_class

HEAD = 128
BUCKETS = [(0, 1024), (1024, 4096), (4096, 16384), (16384, 32768)]


def _llama3_inv_freq(theta, factor, low, high, original):
    out = []
    for i in range(HEAD // 2):
        inv = theta ** (-2 * i / HEAD)
        wavelen = 2 * math.pi / inv
        if wavelen < original / high:
            out.append(inv)
        elif wavelen > original / low:
            out.append(inv / factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append((1 - smooth) * inv / factor + smooth * inv)
    return torch.tensor(out, dtype=torch.float64)


# name, vLLM class, constructor arguments (bf16), float64 inverse frequencies
LAYERS = [
    ("Llama 3 (theta 500000, llama3 x8)", "Llama3RotaryEmbedding",
     lambda dtype: (HEAD, HEAD, 32768, 500000.0, True, dtype, 8.0, 1.0, 4.0, 8192),
     _llama3_inv_freq(500000.0, 8.0, 1.0, 4.0, 8192)),
    ("plain (theta 10000)", "RotaryEmbedding", lambda dtype: (HEAD, HEAD, 32768, 10000.0, True, dtype),
     torch.tensor([10000.0 ** (-2 * i / HEAD) for i in range(HEAD // 2)], dtype=torch.float64)),
]


def _reference(positions, x, inv_freq):
    angle = positions.double()[:, None] * inv_freq
    cos, sin = angle.cos()[:, None], angle.sin()[:, None]
    a, b = x.double().chunk(2, -1)
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


def errors(cls_name, args, inv_freq, dtype, tokens_per_bucket=512, heads=8, seed=0):
    """{bucket: (vLLM's max |error|, rope-gen's max |error|)} over q of [T, heads, HEAD] ~ N(0, 1)."""
    cls = getattr(rotary, cls_name)
    theirs, ours = cls(*args(dtype)), served_class(cls)(*args(dtype))
    assert ours.ropegen.kernel == "computing"
    g = torch.Generator().manual_seed(seed)
    out = {}
    for lo, hi in BUCKETS:
        positions = torch.randint(lo, hi, (tokens_per_bucket,), generator=g)
        q = torch.randn(tokens_per_bucket, heads * HEAD, generator=g).to(dtype)
        want = _reference(positions, q.view(-1, heads, HEAD), inv_freq)
        got_vllm, _ = theirs.forward_cpu(positions, q.clone(), None)
        got_ours, _ = ours.forward_cpu(positions, q.clone(), None)
        out[(lo, hi)] = tuple((got.view(-1, heads, HEAD).double() - want).abs().max().item()
                              for got in (got_vllm, got_ours))
    return out


def main():
    print("| layer | positions | bf16: vLLM (bf16 cache) | bf16: rope-gen | float32: vLLM (float32 cache) "
          "| float32: rope-gen |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, cls_name, args, inv_freq in LAYERS:
        bf16, f32 = (errors(cls_name, args, inv_freq, dtype) for dtype in (torch.bfloat16, torch.float32))
        for bucket in BUCKETS:
            cells = " | ".join(f"{e:.2g}" for e in bf16[bucket] + f32[bucket])
            print(f"| {name} | {bucket[0]}-{bucket[1]} | {cells} |")


if __name__ == "__main__":
    main()
