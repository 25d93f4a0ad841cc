#!/usr/bin/env bash
# The GPU accounting fix on the H200: the launch-bound and pageable-copy loops (short and
# long) and a deep-queue matmul loop under the sampled default, then the per-window check
# (bench/gpu/window_accounting.py) and `gpuspy report` of each. About 40 s of device time.
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin bash bench/gpu/gpuacct-probe.sh OUTDIR
set -uo pipefail
out=${1:?usage: gpuacct-probe.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
mkdir -p "$out"
{
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    for run in "launch-bound short" "launch-bound long" "pageable-memcpy short" "healthy-matmul long"; do
        set -- $run
        d="$out/dumps/$2/$1"
        mkdir -p "$d"
        timeout 120 "$bin/gpuspy" run -o "$d" -- python3 examples/staged.py "$1" --form "$2" \
            > "$d.out" 2> "$d.err"
        echo "$2 $1: exit $? $(grep loop_s "$d.out")"
        "$bin/gpuspy" report "$d" > "$d/report.txt" 2>&1
    done
    python3 bench/gpu/window_accounting.py "$out/dumps"
} 2>&1 | tee "$out/output.txt"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
