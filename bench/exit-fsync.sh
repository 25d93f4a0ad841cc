#!/usr/bin/env bash
# What the fsync of each dump (and its directory) adds to a process's exit: the same short
# program (tests/programs/linked.c against the fake driver, one dump at exit) run in pairs,
# GPUSPY_FSYNC=1 (the default) and GPUSPY_FSYNC=0, alternating, each process timed from
# spawn to reap. Prints the median of the paired differences and the medians of each side.
# Usage: bench/exit-fsync.sh [PAIRS] [OUT_DIR]   (after cargo build --release; OUT_DIR
# should be on the disk the jobs write to: a tmpfs makes fsync free)
set -euo pipefail
pairs=${1:-200}
out=${2:-target/fsync-bench}
bin=${BIN:-target/release}
work=$(mktemp -d)
mkdir -p "$work/driver" "$out"
cp "$bin/libcuda.so" "$work/driver/libcuda.so.1"
cc -O1 -o "$work/linked" tests/programs/linked.c -L"$work/driver" -l:libcuda.so.1
echo "# $(date -u +%F) $(uname -r), $(nproc) cores; out dir $(realpath "$out") on $(df --output=fstype "$out" | tail -n 1)"
LD_LIBRARY_PATH="$work/driver" LD_PRELOAD=$(realpath "$bin/libgpuspy.so") GPUSPY_OUT="$out" \
    GPUSPY_CUPTI=0 GPUSPY_NVML_MS=0 GPUSPY_FLUSH_S=0 \
    python3 - "$work/linked" "$pairs" <<'PY'
import os, statistics, subprocess, sys, time
exe, pairs = sys.argv[1], int(sys.argv[2])
def once(fsync):
    env = dict(os.environ, GPUSPY_FSYNC=fsync)
    t = time.perf_counter_ns()
    subprocess.run([exe, "10", "1"], env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter_ns() - t
diffs, on, off = [], [], []
for i in range(pairs):
    # Alternate which side goes first, so drift falls on both.
    a, b = (once("1"), once("0")) if i % 2 == 0 else reversed((once("0"), once("1")))
    on.append(a); off.append(b); diffs.append(a - b)
ms = lambda ns: f"{ns / 1e6:.3f} ms"
print(f"pairs {pairs}: fsync on median {ms(statistics.median(on))}, off {ms(statistics.median(off))}")
print(f"added per exit: median {ms(statistics.median(diffs))}, p90 {ms(statistics.quantiles(diffs, n=10)[-1])}")
PY
rm -rf "$work"
