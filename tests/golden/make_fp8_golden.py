#!/usr/bin/env python3
"""Golden fp8 KV-cache codes from torch's own float8 conversions.

vLLM's fp8 KV cache stores, for x and a per-tensor scale, the fp8 code of
x / scale (float32 division) saturated to the format's largest finite value
(SEMANTICS.md, "fp8 KV caches"). torch's `.to(torch.float8_e4m3fn)` and
`.to(torch.float8_e5m2)` round to nearest even; they do not saturate (e4m3fn
turns a value past 464 into NaN, e5m2 past 61440 into inf), so the quotient is
clamped first, as vLLM's scaled_fp8_conversion does; a NaN stays NaN.
FlashInfer's quant_scale multiplies instead (RopeQuantizeKernel: x * scale in
float32, then a saturating conversion): `codes_multiply` holds the codes of
clamp(x * scale) (rope-gen's `fp8_scale: multiply`).

Writes data/fp8/fp8_codes.json: `x_bits` (float32 inputs as uint32 bit
patterns: every fp8 value, the midpoints between neighbours and the float32s
next to them, values past the maximum, infinities, NaNs, zeros, float32
denormals, random normals), `scales`, and per format and scale the codes.

Usage (from the repository root): python3 tests/golden/make_fp8_golden.py
(any interpreter with torch; --check compares with the committed file).
"""

import argparse
import json
import sys
from pathlib import Path

import torch

from golden_files import write_or_check

OUT = Path(__file__).resolve().parent / "data" / "fp8" / "fp8_codes.json"
FORMATS = {"fp8_e4m3": (torch.float8_e4m3fn, 448.0), "fp8_e5m2": (torch.float8_e5m2, 57344.0)}
SCALES = [1.0, 0.37, 3.0, 2.0 ** -7, 1000.0]


def inputs():
    vals = []
    for dtype, _ in FORMATS.values():
        codes = torch.arange(256, dtype=torch.uint8).view(dtype).to(torch.float32)
        finite = codes[torch.isfinite(codes)].unique()
        vals.append(finite)
        mids = (finite[1:].double() + finite[:-1].double()) / 2
        mids = mids.to(torch.float32)
        vals.append(mids)
        vals.append(torch.nextafter(mids, torch.full_like(mids, float("inf"))))
        vals.append(torch.nextafter(mids, torch.full_like(mids, float("-inf"))))
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 449.0, 464.0, 465.0, 1e6, -1e6,
                            57344.0, 61440.0, 61441.0, 1e30, -1e30, 1e-30, -1e-30, 1e-45, -1e-45, 3.4e38],
                           dtype=torch.float32)
    vals.append(special)
    g = torch.Generator().manual_seed(7)
    vals.append(torch.randn(512, generator=g, dtype=torch.float32) * 4)
    x = torch.cat(vals)
    neg_nan = torch.tensor([0x7FC00000 | 0x80000000 - (1 << 32)], dtype=torch.int32).view(torch.float32)
    return torch.cat([x, neg_nan])


def codes(x, dtype, max_value, scale, multiply=False):
    s = torch.tensor(scale, dtype=torch.float32)
    q = x * s if multiply else x / s  # float32 product or quotient
    q = torch.where(torch.isnan(q), q, q.clamp(-max_value, max_value))
    return q.to(dtype).view(torch.uint8)


def build():
    x = inputs()
    out = {"peer": f"torch {torch.__version__} float8 conversion of clamp(x / scale) and clamp(x * scale)",
           "x_bits": [int(b) & 0xFFFFFFFF for b in x.view(torch.int32).tolist()],
           "scales": SCALES, "codes": {}, "codes_multiply": {}}
    for name, (dtype, max_value) in FORMATS.items():
        out["codes"][name] = [codes(x, dtype, max_value, s).tolist() for s in SCALES]
        out["codes_multiply"][name] = [codes(x, dtype, max_value, s, multiply=True).tolist() for s in SCALES]
    return json.dumps(out, separators=(",", ":")) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    return write_or_check(OUT, build(), "fp8 golden", ap.parse_args().check)


if __name__ == "__main__":
    sys.exit(main())
