#!/usr/bin/env bash
# The GPU kit's one command (README.md): parity, the bench table, and
# PyTorch's side when python3 can import torch. Results also go to $OUT
# (default: this directory) as JSON. Arguments go to the parity run
# (e.g. --require-device on a GPU machine).
set -u
cd "$(dirname "$0")"
OUT=${OUT:-.}
status=0
./bin/kit_runner parity "$@" || status=1
./bin/kit_runner bench --json "$OUT/bench.json" || status=1
if python3 -c "import torch" 2>/dev/null; then
  python3 torch_bench.py --json "$OUT/torch_bench.json" || status=1
else
  echo "No PyTorch here (python3 -c 'import torch' failed): PyTorch's side is skipped."
fi
exit $status
