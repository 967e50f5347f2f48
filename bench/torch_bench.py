#!/usr/bin/env python3
"""PyTorch on the CPU: RoPE as Hugging Face runs it and as rope-gen's op runs
it, each as a ratio to torch's own copy_ of the same bytes in the same
process (`make bench-torch`; needs torch and the ropegen package).

Sides, all rotating q [B, 32, S, 128] and k [B, 8, S, 128] (llama3-8B's heads,
HF's [B, H, S, D] views of a [B, S, H, D] projection) out of place:
  copy_         out_q.copy_(q), out_k.copy_(k): the yardstick
  hf_eager      LlamaRotaryEmbedding's cos/sin from inv_freq and position ids,
                then apply_rotary_pos_emb (rotate_half), per call
  hf_table      cos/sin rows gathered from a table cached once, then the same apply
  hf_compile    torch.compile (Inductor) of hf_eager's function
  ropegen       torch.ops.ropegen.rope (ropegen.torch.Rope)
  ropegen_      torch.ops.ropegen.rope_, in place (its copy_ still writes a
                second buffer, so a ratio above 1 is "as fast as memory allows")
Then QK-norm + RoPE with Qwen3-8B's heads (q 32, k 8 of 128, weights per
head): HF's own Qwen3RMSNorm per head and apply_rotary_pos_emb (eager, and
torch.compile of the two), against rope-gen's fused kernel of a qk_norm spec
(ropegen.torch.Rope with the weights; out of place, and in place: the out-of-place
op's fresh outputs cost their page faults at prefill sizes). Then RoPE + FP8
(float8_e4m3fn) q and k, scale 1: rope-gen's one kernel (an `output_dtype: fp8_e4m3`
spec into preallocated outputs; GQA through FlashInfer's rope_quantize_fp8 op)
against RoPE then a cast (rope-gen's in-place rope_, then torch's one-pass
bf16 -> float8 copy_), for Llama-3-8B's GQA heads (q 32, k 8 of 128) and
DeepSeek's MLA (q 128 heads, k 1, of 512 nope + 64 rope dims; also FlashInfer's
op, whose nope parts torch casts). Then the per-call cost at decode sizes
in microseconds: copy_ of the same bytes, the op, and the binding called
directly (no dispatcher): the difference is what torch.library's dispatch
costs a call.

Timing: every side once untimed, then rounds in turn (each a batch of calls
lasting about --seconds / rounds); a side's time is its best round's mean.
ratio = copy_ time / side time (same bytes). Numbers from shared machines are
noisy: compare ratios of one run and say what else ran (uptime).
"""
import argparse
import json
import os
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=1.0, help="measuring time per side and case")
    p.add_argument("--dtypes", default="bf16,f32")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes ~20 s a shape)")
    p.add_argument("--json", help="append one JSON line per case to this file")
    p.add_argument("--sections", default="rope,qk_norm,fp8,overhead",
                   help="the tables to run, comma-separated (default: all)")
    a = p.parse_args()
    sections = set(a.sections.split(","))
    if not sections <= {"rope", "qk_norm", "fp8", "overhead"}:
        p.error(f"--sections: unknown {sorted(sections - {'rope', 'qk_norm', 'fp8', 'overhead'})}")
    # This program owns its process: Halide's pool size is read once, before the first kernel runs.
    os.environ["HL_NUM_THREADS"] = str(a.threads)
    import torch
    import ropegen.torch as rt
    torch.set_num_threads(a.threads)

    spec = {"name": "llama3_8b", "head_dim": 128, "frequency": {"theta": 500000},
            "scaling": {"type": "llama3", "factor": 8, "original_max_position": 8192, "low_freq_factor": 1,
                        "high_freq_factor": 4}}
    rope = rt.Rope(spec)
    import ropegen
    inv_freq = torch.tensor(ropegen.freqs(spec)[0], dtype=torch.float32)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def hf_cos_sin(position_ids, dtype):  # LlamaRotaryEmbedding.forward
        freqs = (inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def hf_apply(q, k, cos, sin):  # apply_rotary_pos_emb, unsqueeze_dim=1
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def hf_eager(q, k, position_ids):
        cos, sin = hf_cos_sin(position_ids, q.dtype)
        return hf_apply(q, k, cos, sin)

    hf_compiled = None if a.no_compile or "rope" not in sections else torch.compile(hf_eager, dynamic=False)
    print(f"torch {torch.__version__}, {a.threads} threads; ratio = copy_ time / side time (same bytes, same run)\n")
    if "rope" in sections:
        print("| dtype | case [B, S] | side | µs | GB/s | ratio |")
        print("|---|---|---|---|---|---|")
    for dtype_name in a.dtypes.split(",") if "rope" in sections else []:
        dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype_name]
        table_len = 8192
        cos_table, sin_table = hf_cos_sin(torch.arange(table_len)[None], dtype)
        for b, s, label in ((64, 1, "decode"), (1, 128, "prefill"), (1, 4096, "prefill")):
            g = torch.Generator().manual_seed(0)
            q = torch.randn(b, s, 32, 128, generator=g).to(dtype).transpose(1, 2)
            k = torch.randn(b, s, 8, 128, generator=g).to(dtype).transpose(1, 2)
            ids = (torch.randint(0, table_len, (b, 1), generator=g) if s == 1 else torch.arange(s)[None]).expand(b, s)
            ids = ids.contiguous()
            out_q, out_k = torch.empty_like(q), torch.empty_like(k)
            q_, k_ = q.clone(), k.clone()
            sides = {
                "copy_": lambda: (out_q.copy_(q), out_k.copy_(k)),
                "hf_eager": lambda: hf_eager(q, k, ids),
                "hf_table": lambda: hf_apply(q, k, cos_table[0][ids], sin_table[0][ids]),
                "ropegen": lambda: rope(q, k, ids),
                "ropegen_": lambda: rope.forward_(q_, k_, ids),
            }
            if hf_compiled is not None:
                sides["hf_compile"] = lambda: hf_compiled(q, k, ids)
            times = time_sides(sides, a.seconds, torch)
            moved = 2 * (q.numel() + k.numel()) * q.element_size()
            for name, t in times.items():
                ratio = times["copy_"] / t
                print(f"| {dtype_name} | {label} [{b}, {s}] | {name} | {t * 1e6:.1f} | {moved / t / 1e9:.2f} | {ratio:.2f} |")
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps({"dtype": dtype_name, "case": [b, s], "side": name, "seconds": t,
                                            "ratio": ratio, "threads": a.threads}) + "\n")
    for name, run in (("qk_norm", lambda: qk_norm(rt, torch, a)), ("fp8", lambda: fp8(rt, torch, a)),
                      ("overhead", lambda: overhead(rt, torch, a.seconds))):
        if name in sections:
            print()
            run()


def qk_norm(rt, torch, a):
    """QK-norm + RoPE, Qwen3-8B's heads, bf16, HF's modules against rope-gen's fused kernel."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, apply_rotary_pos_emb
    spec = {"name": "qwen3_8b", "head_dim": 128, "frequency": {"theta": 1000000},
            "qk_norm": {"type": "rms", "eps": 1e-6, "weight": "per_head"}}
    dtype = torch.bfloat16
    g = torch.Generator().manual_seed(0)
    norms = [Qwen3RMSNorm(128, eps=1e-6).to(dtype) for _ in range(2)]
    for norm in norms:
        norm.weight.data = (torch.rand(128, generator=g) + 0.5).to(dtype)
    rope = rt.Rope(spec, q_norm_weight=norms[0].weight.data, k_norm_weight=norms[1].weight.data).requires_grad_(False)
    inv_freq = 1.0 / 1000000.0 ** (torch.arange(0, 128, 2, dtype=torch.float32) / 128)
    angles = torch.arange(8192, dtype=torch.float32)[:, None] * inv_freq
    cos_table = torch.cat((angles, angles), -1).cos().to(dtype)
    sin_table = torch.cat((angles, angles), -1).sin().to(dtype)

    def hf(q, k, ids):  # Qwen3Attention: q_norm / k_norm on [B, S, H, D], then [B, H, S, D] and the rotation
        return apply_rotary_pos_emb(norms[0](q).transpose(1, 2), norms[1](k).transpose(1, 2), cos_table[ids],
                                    sin_table[ids])

    compiled = None if a.no_compile else torch.compile(hf, dynamic=False)
    print(f"QK-norm + RoPE, bf16, q 32 + k 8 heads of 128, {a.threads} threads; ratio = copy_ time / side time\n")
    print("| case [B, S] | side | µs | ratio |")
    print("|---|---|---|---|")
    with torch.no_grad():
        for b, s, label in ((64, 1, "decode"), (4, 4096, "prefill")):
            q = torch.randn(b, s, 32, 128, generator=g).to(dtype)
            k = torch.randn(b, s, 8, 128, generator=g).to(dtype)
            ids = torch.randint(0, 8192, (b, s), generator=g)
            out_q, out_k = torch.empty_like(q), torch.empty_like(k)
            q_, k_ = q.clone(), k.clone()  # rotated over and over in place: the time is the same
            sides = {"copy_": lambda: (out_q.copy_(q), out_k.copy_(k)), "hf_eager": lambda: hf(q, k, ids),
                     "ropegen": lambda: rope(q, k, ids, layout="bshd"),
                     "ropegen_": lambda: rope.forward_(q_, k_, ids, layout="bshd")}
            if compiled is not None:
                sides["hf_compile"] = lambda: compiled(q, k, ids)
            times = time_sides(sides, a.seconds, torch)
            for name, t in times.items():
                print(f"| {label} [{b}, {s}] | {name} | {t * 1e6:.1f} | {times['copy_'] / t:.2f} |")


def fp8(rt, torch, a):
    """RoPE + FP8 out in one kernel against RoPE then a cast, bf16 in, float8_e4m3fn out, scale 1."""
    g = torch.Generator().manual_seed(0)
    dtype, f8 = torch.bfloat16, torch.float8_e4m3fn
    print(f"RoPE + FP8 q and k (bf16 -> float8_e4m3fn), {a.threads} threads; ratio = copy_ time / side time "
          "(copy_: the bf16 inputs into bf16 buffers); two / one = the two passes' time over the one kernel's\n")
    print("| model | tokens | side | µs | ratio | two / one |")
    print("|---|---|---|---|---|---|")
    gqa = ("GQA 32/8 x 128", 32, 8, 128, 0, True)
    mla = ("MLA 128 x (512 + 64)", 128, 1, 576, 512, False)
    for (label, hq, hk, dim, nope, neox), tokens in ((gqa, 64), (gqa, 4096), (mla, 64), (mla, 1024)):
        spec = {"name": "fp8_bench", "head_dim": dim, "rotary_dim": dim - nope, "rotary_offset": nope,
                "pairing": "half" if neox else "interleaved", "layout": "thd", "frequency": {"theta": 10000}}
        fused, plain = rt.Rope(dict(spec, output_dtype="fp8_e4m3")), rt.Rope(spec)
        q = torch.randn(tokens, hq, dim, generator=g).to(dtype)
        k = torch.randn(tokens, hk, dim, generator=g).to(dtype)
        ids = torch.randint(0, 8192, (tokens,), generator=g)
        q8, k8 = torch.empty(q.shape, dtype=f8), torch.empty(k.shape, dtype=f8)
        q_, k_ = q.clone(), k.clone()  # rotated over and over in place: the time is the same
        out_q, out_k = torch.empty_like(q), torch.empty_like(k)
        sides = {"copy_": lambda: (out_q.copy_(q), out_k.copy_(k)),
                 "one kernel": lambda: rt._run(fused.spec, q, k, ids, "thd", 0, None, None, q8, k8),
                 "rope_ then cast": lambda: (plain.forward_(q_, k_, ids, layout="thd"), q8.copy_(q_), k8.copy_(k_))}
        cache = torch.randn(8192, dim - nope, generator=g)
        if nope:  # FlashInfer's op: rope parts by the kernel, nope parts cast by torch
            sides["rope_quantize_fp8 op"] = lambda: rt.rope_quantize_fp8(
                q[..., nope:], k[..., nope:], q[..., :nope], k[..., :nope], cache, ids, neox,
                q_rope_out=q8[..., nope:], k_rope_out=k8[..., nope:], q_nope_out=q8[..., :nope],
                k_nope_out=k8[..., :nope])
        else:
            sides["rope_quantize_fp8 op"] = lambda: rt.rope_quantize_fp8(
                q, k, None, None, cache, ids, neox, q_rope_out=q8, k_rope_out=k8)
        with torch.no_grad():
            times = time_sides(sides, a.seconds, torch)
        for name, t in times.items():
            two = f"{times['rope_ then cast'] / t:.2f}" if name != "copy_" else ""
            print(f"| {label} | {tokens} | {name} | {t * 1e6:.1f} | {times['copy_'] / t:.2f} | {two} |")
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps({"fp8": label, "tokens": tokens, "side": name, "seconds": t,
                                        "threads": a.threads}) + "\n")


def overhead(rt, torch, seconds):
    """Per-call microseconds at decode sizes: what a call costs beyond its bytes."""
    rope = rt.Rope({"name": "t", "head_dim": 128, "frequency": {"theta": 500000}})
    print("| per call, f32 decode | copy_ µs | op in place µs | op out of place µs | binding direct µs |")
    print("|---|---|---|---|---|")
    for b in (1, 64):
        q, k = torch.randn(b, 32, 1, 128), torch.randn(b, 8, 1, 128)
        ids = torch.randint(0, 8192, (b, 1))
        out_q, out_k = torch.empty_like(q), torch.empty_like(k)
        with torch.no_grad():
            times = time_sides({
                "copy_": lambda: (out_q.copy_(q), out_k.copy_(k)),
                "op_": lambda: torch.ops.ropegen.rope_(rope.spec, q, k, ids, "bhsd", 0, None, None),
                "op": lambda: torch.ops.ropegen.rope(rope.spec, q, k, ids, "bhsd", 0, None, None),
                "direct": lambda: rt._run(rope.spec, q, k, ids, "bhsd", 0, None, None, q, k),
            }, seconds, torch)
        print(f"| [{b}, 1] | " + " | ".join(f"{times[n] * 1e6:.2f}" for n in ("copy_", "op_", "op", "direct")) + " |")


def time_sides(sides, seconds, torch, rounds=7):
    for f in sides.values():
        f()
    batch = {}
    for name, f in sides.items():  # calls per round: about seconds / rounds of each side
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.02 or n < 2:
            f()
            n += 1
        batch[name] = max(1, int(seconds / rounds / ((time.perf_counter() - t0) / n)))
    best = {name: float("inf") for name in sides}
    for _ in range(rounds):
        for name, f in sides.items():
            t0 = time.perf_counter()
            for _ in range(batch[name]):
                f()
            best[name] = min(best[name], (time.perf_counter() - t0) / batch[name])
    return best


if __name__ == "__main__":
    main()
