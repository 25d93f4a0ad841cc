#!/usr/bin/env bash
# What a Python call-site capture costs: the shim times each capture (stack read, line
# decoding, table update) and the dump holds the total. Runs bench/callsites.py under the
# fake driver at stack depths 3 and 40 (16 frames kept) and prints ns per capture.
# Usage: bench/callsites.sh [CALLS] [PYTHON]   (from the repository root, after cargo build --release)
set -euo pipefail
calls=${1:-2000}
python=${2:-python3}
bin=${BIN:-target/release}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/driver"
cp "$bin/libcuda.so" "$work/driver/libcuda.so.1"
"$python" -c 'import sys; print("Python", sys.version.split()[0])'
for depth in 3 40; do
    rm -rf "$work/dumps"
    LD_LIBRARY_PATH="$work/driver" LD_PRELOAD="$(realpath "$bin/libgpuspy.so")" \
        GPUSPY_OUT="$work/dumps" GPUSPY_FLUSH_S=0 FAKECUDA_DELAY_NS=cuStreamSynchronize=150000 \
        "$python" bench/callsites.py "$depth" "$calls"
    "$python" - "$work/dumps" "$depth" <<'PY'
import glob, json, sys
dump = json.load(open(glob.glob(sys.argv[1] + "/gpuspy-*.json")[0]))
c = dump["call_sites"]
frames = len(c["sites"][0]["frames"])
print(f"stack depth {sys.argv[2]:>2} ({frames} frames kept): {c['captures']} captures, "
      f"{c['capture_ns'] / max(c['captures'], 1):.0f} ns per capture")
PY
done
