#!/usr/bin/env bash
# The shim's overhead per intercepted call, against whichever libcuda.so.1 is on the
# library path (the fake one when FAKE=1, the default without a GPU).
#   1. Instructions: callgrind, N and 3N launches, with and without the shim; the
#      marginal instructions per call are (Ir(3N) - Ir(N)) / 2N, shim minus no shim, on
#      the calling thread only (gpuspy's writer thread does timeline work per unit of wall
#      time, which valgrind stretches; its cost is measured apart, docs/overhead.md).
#   2. Wall clock: `overhead paired`, repeated; the median of the per-run p50 differences.
# Usage: bench/overhead.sh [REPEATS]   (run from the repository root after cargo build --release)
set -euo pipefail
repeats=${1:-5}
bin=${BIN:-target/release}
shim=$(realpath "$bin/libgpuspy.so")
work=$(mktemp -d)
if [ "${FAKE:-1}" = 1 ]; then
    mkdir -p "$work/driver"
    cp "$bin/libcuda.so" "$work/driver/libcuda.so.1"
    export LD_LIBRARY_PATH="$work/driver"
fi
cc -O2 -o "$work/overhead" bench/overhead.c -ldl
export GPUSPY_OUT="$work/dumps" GPUSPY_FLUSH_S=0

ir() { # instructions of the main thread of one run: ir PRELOAD N [CALL]
    rm -f "$work"/cg.out*
    LD_PRELOAD="$1" valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$work/cg.out" "$work/overhead" count "$2" ${3:-} >/dev/null 2>&1
    awk '/^summary:/ {print $2}' "$work/cg.out-01"
}
marginal() { # marginal() LABEL [CALL]
    n=20000
    base1=$(ir "" $n "${2:-}"); base3=$(ir "" $((3 * n)) "${2:-}")
    shim1=$(ir "$shim" $n "${2:-}"); shim3=$(ir "$shim" $((3 * n)) "${2:-}")
    awk -v b1="$base1" -v b3="$base3" -v s1="$shim1" -v s3="$shim3" -v n="$n" -v what="$1" 'BEGIN {
        base = (b3 - b1) / (2 * n); shim = (s3 - s1) / (2 * n);
        printf "instructions per %s: no shim %.1f, shim %.1f, added %.1f\n", what, base, shim, shim - base }'
}
if command -v valgrind >/dev/null 2>&1; then
    marginal "cuLaunchKernel (11 arguments)" launch
    marginal "cuStreamQuery (1 argument)" query
    # Each step is a launch plus a sync: the sync's own cost is this less the launch's.
    marginal "empty cuLaunchKernel + cuStreamSynchronize" sync
    marginal "pageable 4 KiB cuMemcpyHtoDAsync_v2" htod
else
    echo "valgrind not installed: instruction counts skipped"
fi

echo "paired wall clock, $repeats runs (ns):"
for i in $(seq "$repeats"); do
    "$work/overhead" paired 400 | tail -n 1 | sed 's/^/  A\/A    /'
    LD_PRELOAD="$shim" "$work/overhead" paired 400 | tail -n 1 | sed 's/^/  shim   /'
done | tee "$work/paired.txt"
awk '/shim   added/ {print $4}' "$work/paired.txt" | sort -n | awk '{v[NR]=$1} END {
    printf "median added p50 with the shim: %d ns per call\n", v[int((NR + 1) / 2)] }'
echo "paired with cold caches (1 MiB swept before each call), $repeats runs (ns):"
for i in $(seq "$repeats"); do
    "$work/overhead" paired-cold 100 | tail -n 1 | sed 's/^/  A\/A    /'
    LD_PRELOAD="$shim" "$work/overhead" paired-cold 100 | tail -n 1 | sed 's/^/  shim   /'
done | tee "$work/cold.txt"
awk '/shim   added/ {print $4}' "$work/cold.txt" | sort -n | awk '{v[NR]=$1} END {
    printf "median added p50 with the shim, cold caches: %d ns per call\n", v[int((NR + 1) / 2)] }'
rm -rf "$work"
