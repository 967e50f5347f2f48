#!/usr/bin/env bash
# The README's bench table: rope-gen bench (ratio to a copy of the same bytes,
# same run) and PyTorch eager on HF's formula, bshd, head_dim 128.
# Usage: bench/run_table.sh [PYTHON_WITH_TORCH]   (run from the repo root after `make build`)
set -euo pipefail
tool=build/rope-gen
py=${1:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| dtype | shape [B,S,H] | threads | rope-gen GB/s | copy GB/s | ratio | PyTorch eager GB/s (apply / full) | speed-up vs eager full |"
echo "|---|---|---|---|---|---|---|---|"
for dtype in f32 bf16; do
  printf 'name: bench_%s\nhead_dim: 128\nlayout: bshd\ndtype: %s\n' "$dtype" "$dtype" > "$tmp/spec.yaml"
  for shape in 1,128,32 1,4096,32 4,4096,32; do
    for threads in 1 2; do
      r=$("$tool" bench "$tmp/spec.yaml" --shape "$shape" --threads "$threads")
      torch_cols="n/a | n/a"
      if [ -n "$py" ]; then
        t=$("$py" bench/pytorch_rope.py --shape "$shape" --dtype "$dtype" --threads "$threads")
        torch_cols=$(python3 - "$r" "$t" <<'PY'
import json, sys
r, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{t['apply_gbps']:.1f} / {t['full_gbps']:.1f} | {r['gbps'] / t['full_gbps']:.1f}x")
PY
)
      fi
      python3 - "$r" "$dtype" "$shape" "$threads" "$torch_cols" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(f"| {sys.argv[2]} | [{sys.argv[3]}] | {sys.argv[4]} | {r['gbps']:.1f} | {r['copy_gbps']:.1f} | {r['ratio']:.2f} | {sys.argv[5]} |")
PY
    done
  done
done
