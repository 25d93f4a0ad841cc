#!/usr/bin/env bash
# The shim's overhead on a real GPU, on its own (bench/gpu/run.sh runs it too, shorter):
#   1. bench/overhead.c paired in one process, warm and cold caches (A/A, then the shim);
#   2. the PyTorch elementwise loop (2 launches per iteration), best of 5 passes per
#      process, PAIRS pairs of processes in alternating order, pinned to one core.
# Usage on the GPU machine, from the repository root: bash bench/gpu/overhead.sh OUTDIR [PAIRS]
set -uo pipefail
out=${1:?usage: overhead.sh OUTDIR [PAIRS]}
pairs=${2:-25}
bin=$(realpath "${BIN:-.dev/bin}")
shim="$bin/libgpuspy.so"
core=${CORE:-3}
py=python3
mkdir -p "$out/dumps"
export GPUSPY_FLUSH_S=0 GPUSPY_OUT="$out/dumps" PYTHONUNBUFFERED=1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), core $core"
cc -O2 -o "$out/overhead" bench/overhead.c -ldl
for mode in paired paired-cold; do
    echo "== $mode: added ns per empty-kernel cuLaunchKernel, 7 runs"
    rounds=400; [ "$mode" = paired-cold ] && rounds=100
    for i in 1 2 3 4 5 6 7; do
        taskset -c "$core" "$out/overhead" $mode $rounds | tail -n 1 | sed 's/^/  A\/A  /'
        LD_PRELOAD="$shim" taskset -c "$core" "$out/overhead" $mode $rounds | tail -n 1 | sed 's/^/  shim /'
    done | tee "$out/$mode.txt"
    awk '/shim added/ {print $4}' "$out/$mode.txt" | sort -n | awk '{v[NR]=$1} END {
        printf "  median added p50: %d ns per call\n", v[int((NR + 1) / 2)] }'
done
echo "== PyTorch elementwise loop: ns per iteration, $pairs pairs"
timed() { LD_PRELOAD="${1:-}" taskset -c "$core" $py bench/gpu/workloads.py torch-timed | awk '/timed/ {print $5}'; }
for i in $(seq "$pairs"); do
    if [ $((i % 2)) = 1 ]; then a=$(timed); b=$(timed "$shim"); else b=$(timed "$shim"); a=$(timed); fi
    echo "  pair $i: without $a with $b"
done | tee "$out/timed.txt"
$py - "$out/timed.txt" <<'PY'
import re, statistics, sys
pairs = [tuple(map(float, re.findall(r"(?:without|with) ([\d.]+)", l))) for l in open(sys.argv[1])]
a = statistics.median(p[0] for p in pairs); b = statistics.median(p[1] for p in pairs)
d = sorted(p[1] - p[0] for p in pairs)
n = len(d)
lo, hi = d[max(0, n // 2 - int(n ** 0.5))], d[min(n - 1, n // 2 + int(n ** 0.5))]
print(f"median without {a:.1f} ns/iter, with {b:.1f} ns/iter")
print(f"median paired difference {statistics.median(d):+.1f} ns ({statistics.median(d) / a * 100:+.2f}%), "
      f"rough 95% interval of the median [{lo:+.0f}, {hi:+.0f}] ns")
PY
rm -rf "$out/dumps" "$out/overhead"
