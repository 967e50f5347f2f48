#!/usr/bin/env bash
# rope-gen's columns of docs/performance.md's table against PyTorch eager:
# rope-gen bench (ratio to a copy of the same bytes, same run), bshd, head_dim 128.
# PyTorch's sides: bench/torch_bench.py.
# Usage: bench/run_table.sh   (run from the repo root after `make build`)
set -euo pipefail
tool=build/rope-gen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| dtype | shape [B,S,H] | threads | rope-gen GB/s | copy GB/s | ratio |"
echo "|---|---|---|---|---|---|"
for dtype in f32 bf16; do
  printf 'name: bench_%s\nhead_dim: 128\nlayout: bshd\ndtype: %s\n' "$dtype" "$dtype" > "$tmp/spec.yaml"
  for shape in 1,128,32 1,4096,32 4,4096,32; do
    for threads in 1 2; do
      r=$("$tool" bench "$tmp/spec.yaml" --shape "$shape" --threads "$threads")
      python3 - "$r" "$dtype" "$shape" "$threads" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(f"| {sys.argv[2]} | [{sys.argv[3]}] | {sys.argv[4]} | {r['gbps']:.1f} | {r['copy_gbps']:.1f} | {r['ratio']:.2f} |")
PY
    done
  done
done
