#!/usr/bin/env bash
# build_kit.sh BUILD OUT [MAX_SPECS] [TARGETS]: the GPU kit in OUT
# (gpu_kit/README.md), from a rope-gen build tree (BUILD/rope-gen,
# BUILD/gpu_kit/kit_cases, BUILD/gpu_kit/kit_runner). Needs Halide (through
# rope-gen) and a C++ compiler; no CUDA toolkit, no GPU.
#
# OUT is replaced only if it is an earlier kit (it holds .rope-gen-gpu-kit);
# any other existing directory is refused.
set -euo pipefail
BUILD=$(realpath "$1")
OUT=$2
MAX_SPECS=${3:-48}
# One CPU target (the host kernels the device is compared with, bit for bit:
# every x86 target computes the same bits) and CUDA.
TARGETS=${4:-x86-64-linux-sse41,cuda}
SRC=$(cd "$(dirname "$0")" && pwd)
LIMIT_MIB=60

if [ -e "$OUT" ]; then
  [ -f "$OUT/.rope-gen-gpu-kit" ] || { echo "build_kit.sh: $OUT exists and is not a GPU kit; not touching it" >&2; exit 2; }
  rm -rf "$OUT"
fi
mkdir -p "$OUT"/{bin,libs,cases}
touch "$OUT/.rope-gen-gpu-kit"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rope-gen-kit.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

"$BUILD/gpu_kit/kit_cases" "$OUT" --max-specs "$MAX_SPECS"
mkdir -p "$WORK/bench"
for f in "$SRC"/bench/*.yaml; do cp "$f" "$WORK/bench/"; done

# One shared object per spec exporting kit_run (its <name>_run): the
# library's Halide runtime and call code stay private to it.
build_one() {
  local spec=$1 out=$2 build=$3 targets=$4 work=$5
  local stem; stem=$(basename "$spec" .yaml)
  local dir="$work/$stem"
  # Every library's symbols are its spec's name: test specs' short names
  # (t, c, ...) become kit_<hash>, so none collides with a header of its own.
  local named="$work/$stem.yaml"
  case "$spec" in */bench/*) named=$spec ;; *) sed "0,/^name:.*/s//name: kit_$stem/" "$spec" > "$named" ;; esac
  local summary; summary=$("$build/rope-gen" build "$named" --targets "$targets" -o "$dir")
  local name; name=$(printf '%s' "$summary" | sed -n 's/^{"name":"\([^"]*\)".*/\1/p')
  printf '#include "%s.h"\n__attribute__((visibility("default"))) int kit_run(const ropegen_call *c, ropegen_message *m) { return %s_run(c, m); }\n' \
    "$name" "$name" > "$dir/kit_shim.c"
  local lib="$stem"
  case "$spec" in */bench/*) lib=$name ;; esac
  c++ -shared -fPIC -O2 -I "$dir" -x c "$dir/kit_shim.c" -x none "$dir/lib$name.a" \
    -Wl,--version-script="$work/kit.map" -Wl,--gc-sections -ldl -lpthread -o "$out/libs/$lib.so"
  strip "$out/libs/$lib.so"
}
export -f build_one
echo '{ global: kit_run; local: *; };' > "$WORK/kit.map"
ls "$OUT"/specs/*.yaml "$WORK"/bench/*.yaml |
  xargs -P "$(nproc)" -I{} bash -c 'build_one "$@"' _ {} "$OUT" "$BUILD" "$TARGETS" "$WORK"

cp "$BUILD/gpu_kit/kit_runner" "$OUT/bin/"
cp "$SRC/run.sh" "$SRC/torch_bench.py" "$OUT/"
cp "$SRC/README.md" "$OUT/README.md"
printf '{"targets": "%s", "built": "%s"}\n' "$TARGETS" "$(date -u +%FT%TZ)" > "$OUT/kit.json"
size=$(du -sm "$OUT" | cut -f1)
echo "GPU kit in $OUT: $(ls "$OUT"/libs | wc -l) libraries, ${size} MiB (targets $TARGETS)"
if [ "$size" -gt "$LIMIT_MIB" ]; then echo "build_kit.sh: the kit is over ${LIMIT_MIB} MiB; lower MAX_SPECS" >&2; exit 1; fi
