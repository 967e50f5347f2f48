#!/usr/bin/env bash
# ctest gpu_kit_no_device BUILD WORK: builds a small GPU kit and runs it as a
# machine without a CUDA device would: run.sh must find its libraries and
# data, pass the host half of the parity checks, say that no CUDA kernel ran
# and exit 0; the runner must refuse a missing kit (exit 2), fail on a
# corrupted reference (exit 1), and exit 3 under --require-device.
set -euo pipefail
BUILD=$1
WORK=$2
KIT=$WORK/kit
mkdir -p "$WORK"
"$(dirname "$0")/build_kit.sh" "$BUILD" "$KIT" 4

out=$("$KIT/run.sh" --no-device)
echo "$out"
grep -q "host only: no CUDA kernel ran" <<<"$out"
grep -q "No bench without a CUDA device" <<<"$out"
grep -q "0 failures" <<<"$out"

set +e
"$KIT/bin/kit_runner" parity --kit "$WORK/no-such-kit" --no-device; missing=$?
"$KIT/bin/kit_runner" parity --kit "$KIT" --no-device --require-device; required=$?
# A reference value off by far more than the tolerance: case 0's first truth value.
rm -rf "$WORK/bad" && cp -r "$KIT" "$WORK/bad"
python3 - "$WORK/bad" <<'PY'
import json, struct, sys
kit = sys.argv[1]
case = json.load(open(kit + "/cases/index.json"))[0]
at = case["truth"]["out_q"]["offset"]
path = kit + "/cases/" + case["data"]
with open(path, "r+b") as f:
    f.seek(at)
    (v,) = struct.unpack("<d", f.read(8))
    f.seek(at)
    f.write(struct.pack("<d", v + 1.0))
PY
"$WORK/bad/bin/kit_runner" parity --kit "$WORK/bad" --no-device; corrupted=$?
set -e
echo "missing kit: exit $missing, --require-device: exit $required, corrupted reference: exit $corrupted"
[ "$missing" -eq 2 ] && [ "$required" -eq 3 ] && [ "$corrupted" -eq 1 ]
