#!/usr/bin/env bash
# The hot path of two builds of the shim, paired in one machine session: the added p50 per
# empty-kernel cuLaunchKernel (bench/overhead.c paired, one process per run), in runs that
# alternate between the builds and swap their order each round, pinned to one core.
#   1. against the real driver: what a program sees, with the driver's own spread;
#   2. against the fake driver (tools/fakecuda, a call of a few ns) on the same CPU: the
#      shim's own cost, without the driver's spread.
# Prints each run, then per driver the median of the paired differences (NEW - BASE) with a
# distribution-free 90 % interval (sign-test order statistics).
# Usage on the GPU machine, from the repository root:
#   BASE=.dev/base BIN=.dev/bin bash bench/gpu/hotpath.sh OUTDIR [ROUNDS]
# BIN also holds the fake driver as libcuda.so (cp target/release/libcuda.so .dev/bin/).
set -uo pipefail
out=${1:?usage: hotpath.sh OUTDIR [ROUNDS]}
rounds=${2:-15}
base=$(realpath "${BASE:-.dev/base}")/libgpuspy.so
new=$(realpath "${BIN:-.dev/bin}")/libgpuspy.so
core=${CORE:-3}
mkdir -p "$out/dumps" "$out/fake"
cp "$(dirname "$new")/libcuda.so" "$out/fake/libcuda.so.1"
export GPUSPY_FLUSH_S=0 GPUSPY_OUT="$out/dumps"
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), core $core"
echo "base $(sha256sum "$base" | cut -c1-12), new $(sha256sum "$new" | cut -c1-12)"
cc -O2 -o "$out/overhead" bench/overhead.c -ldl
added() { # added SHIM [env...]: the run's added p50
    env LD_PRELOAD="$1" "${@:2}" taskset -c "$core" "$out/overhead" paired 400 | awk '/^added/ {print $3}'
}
for driver in real fake; do
    envs=()
    [ "$driver" = fake ] && envs=(LD_LIBRARY_PATH="$out/fake" GPUSPY_CUPTI=0)
    for i in $(seq "$rounds"); do
        if [ $((i % 2)) = 1 ]; then
            b=$(added "$base" "${envs[@]}"); n=$(added "$new" "${envs[@]}")
        else
            n=$(added "$new" "${envs[@]}"); b=$(added "$base" "${envs[@]}")
        fi
        echo "$driver $i base $b new $n"
    done
done | tee "$out/hotpath-runs.txt"
python3 - "$out/hotpath-runs.txt" <<'PY'
import statistics, sys
sys.path.insert(0, "bench/gpu")
from signtest import sign_test_ci
rows = [l.split() for l in open(sys.argv[1])]
for driver in ("real", "fake"):
    pairs = [(float(r[3]), float(r[5])) for r in rows if r[0] == driver]
    d = [n - b for b, n in pairs]
    lo, hi = sign_test_ci(d)
    print(f"{driver} driver, {len(d)} pairs: added p50 base {statistics.median(p[0] for p in pairs):.0f} ns, "
          f"new {statistics.median(p[1] for p in pairs):.0f} ns; new - base median {statistics.median(d):+.0f} ns, "
          f"90 % interval [{lo:+.0f}, {hi:+.0f}] ns")
PY
rm -rf "$out/dumps" "$out/fake" "$out/overhead"
