#!/usr/bin/env bash
# What CUPTI activity collection adds, paired: each round runs a loop without the shim, with
# the shim and GPUSPY_CUPTI=0, and with the shim and CUPTI on, in rotating order, pinned to
# one core; medians of ns per iteration over ROUNDS rounds. Loops: the PyTorch elementwise
# loop (launch-bound) and a 4096^3 bf16 matmul loop (GPU-bound).
#   bash bench/gpu/truth-overhead.sh OUTDIR [ROUNDS]
set -uo pipefail
out=${1:?usage: truth-overhead.sh OUTDIR [ROUNDS]}
rounds=${2:-7}
bin=$(realpath "${BIN:-.dev/bin}")
shim="$bin/libgpuspy.so"
core=${CORE:-3}
mkdir -p "$out/dumps"
export GPUSPY_FLUSH_S=0 GPUSPY_OUT="$out/dumps" PYTHONUNBUFFERED=1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), core $core, $rounds rounds"
one() { # one CONFIG WORKLOAD N
    local pre="" cupti=1
    case $1 in none) ;; cupti-off) pre=$shim cupti=0 ;; cupti-on) pre=$shim ;; esac
    GPUSPY_CUPTI=$cupti LD_PRELOAD="$pre" taskset -c "$core" python3 bench/gpu/truth.py "$2" "$3" |
        awk -v c="$1" -v w="$2" '/loop_ns_per_iter/ {print w, c, $2}'
}
configs=(none cupti-off cupti-on)
for r in $(seq "$rounds"); do
    for k in 0 1 2; do
        c=${configs[$(((r + k) % 3))]}
        one "$c" elementwise 20000
        one "$c" matmul 2000
    done
done | tee "$out/overhead-raw.txt"
python3 - "$out/overhead-raw.txt" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, c, ns = line.split()
    v[w, c].append(float(ns))
for w in ("elementwise", "matmul"):
    base = statistics.median(v[w, "none"])
    for c in ("none", "cupti-off", "cupti-on"):
        m = statistics.median(v[w, c])
        print(f"{w:12} {c:10} median {m:10.1f} ns/iter  {100 * (m / base - 1):+6.2f}% vs none  (n={len(v[w, c])})")
PY
rm -rf "$out/dumps"
