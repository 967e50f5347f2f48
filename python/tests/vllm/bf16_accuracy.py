"""bf16 q/k rotation error by position, up to 32k: vLLM's CPU kernel on its
bf16-cast cos/sin cache, and rope-gen's computing kernel serving the same
layer, both against a float64 rotation of the same bf16 inputs with the
angles computed in float64 from the layer's formula (written out here, apart
from both).

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
     (HEAD, HEAD, 32768, 500000.0, True, torch.bfloat16, 8.0, 1.0, 4.0, 8192),
     _llama3_inv_freq(500000.0, 8.0, 1.0, 4.0, 8192)),
    ("plain (theta 10000)", "RotaryEmbedding", (HEAD, HEAD, 32768, 10000.0, True, torch.bfloat16),
     torch.tensor([10000.0 ** (-2 * i / HEAD) for i in range(HEAD // 2)], dtype=torch.float64)),
]


def _reference(positions, x, inv_freq):
    angle = positions.double()[:, None] * inv_freq
    cos, sin = angle.cos()[:, None], angle.sin()[:, None]
    a, b = x.double().chunk(2, -1)
    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)


def errors(cls_name, args, inv_freq, tokens_per_bucket=512, heads=8, seed=0):
    """{bucket: (vLLM's max |error|, rope-gen's max |error|)} over q of [T, heads, HEAD]."""
    cls = getattr(rotary, cls_name)
    theirs, ours = cls(*args), served_class(cls)(*args)
    assert ours.ropegen.kernel == "computing"
    g = torch.Generator().manual_seed(seed)
    out = {}
    for lo, hi in BUCKETS:
        positions = torch.randint(lo, hi, (tokens_per_bucket,), generator=g)
        q = torch.randn(tokens_per_bucket, heads * HEAD, generator=g).bfloat16()
        want = _reference(positions, q.view(-1, heads, HEAD), inv_freq)
        got_vllm, _ = theirs.forward_cpu(positions, q.clone(), None)
        got_ours, _ = ours.forward_cpu(positions, q.clone(), None)
        out[(lo, hi)] = tuple((got.view(-1, heads, HEAD).double() - want).abs().max().item()
                              for got in (got_vllm, got_ours))
    return out


def main():
    print("| layer | positions | vLLM, bf16 cache | rope-gen computing kernel |")
    print("| --- | --- | --- | --- |")
    for name, cls_name, args, inv_freq in LAYERS:
        for (lo, hi), (vllm_err, ours_err) in errors(cls_name, args, inv_freq).items():
            print(f"| {name} | {lo}-{hi} | {vllm_err:.3g} | {ours_err:.3g} |")


if __name__ == "__main__":
    main()
