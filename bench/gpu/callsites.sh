#!/usr/bin/env bash
# Python call sites on the GPU (issue 16), from the repository root of a build:
#   1. the .item()-per-step loop and a pageable h.to('cuda') loop: the dump and the report
#      must name their marked lines (PASS/FAIL), with the capture's own cost per capture;
#   2. the launch-bound loop's overhead, this shim against BASE's (a build without call
#      sites, e.g. main), ROUNDS paired rounds in alternating order, pinned to one core.
# Usage: BASE=DIR bash bench/gpu/callsites.sh OUTDIR [ROUNDS]
#   BIN (default .dev/bin) and BASE hold libgpuspy.so and gpuspy.
set -uo pipefail
out=${1:?usage: BASE=DIR callsites.sh OUTDIR [ROUNDS]}
rounds=${2:-7}
bin=$(realpath "${BIN:-.dev/bin}")
base=$(realpath "${BASE:?BASE: the directory of a libgpuspy.so without call sites}")
core=${CORE:-3}
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(python3 -V), core $core"
for mode in item pageable; do
    dumps="$out/$mode"
    rm -rf "$dumps" && mkdir -p "$dumps"
    echo "== $mode"
    GPUSPY_OUT="$dumps" LD_PRELOAD="$bin/libgpuspy.so" python3 bench/gpu/callsites.py "$mode" 200
    python3 bench/gpu/callsites.py check "$mode" "$dumps"
    "$bin/gpuspy" report "$dumps" | grep -E "Verdict|of the blocked time" | sed 's/^/  /'
done
echo "== launch-bound loop: ns per iteration, $rounds rounds (base = without call sites)"
one() { GPUSPY_OUT="$out/launch" LD_PRELOAD="$1/libgpuspy.so" taskset -c "$core" \
    python3 bench/gpu/callsites.py launch 20000 | awk '/loop_ns_per_iter/ {print $2}'; }
mkdir -p "$out/launch"
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then a=$(one "$base"); b=$(one "$bin"); else b=$(one "$bin"); a=$(one "$base"); fi
    echo "  round $r: base $a callsites $b"
done | tee "$out/launch.txt"
python3 - "$out/launch.txt" <<'PY'
import re, statistics, sys
pairs = [tuple(map(float, re.findall(r"(?:base|callsites) ([\d.]+)", l))) for l in open(sys.argv[1])]
d = [b - a for a, b in pairs]
a = statistics.median(p[0] for p in pairs)
print(f"median base {a:.1f} ns/iter, with call sites {statistics.median(p[1] for p in pairs):.1f} ns/iter, "
      f"median paired difference {statistics.median(d):+.1f} ns ({statistics.median(d) / a * 100:+.2f}%), "
      f"range [{min(d):+.1f}, {max(d):+.1f}]")
PY
