#!/usr/bin/env bash
# First look at gpuspy's sampled CUPTI mode on the H200: is switching activity kinds on
# and off safe here (bench/gpu/cupti-toggle.py, each step bounded by `timeout`), are
# unified-memory counters enabled late seen, and a first paired cost of each mode
# (bench/gpu/overhead-modes.sh with few pairs).
#   bash bench/gpu/sampling-probe.sh OUTDIR [PAIRS]
set -uo pipefail
out=${1:?usage: sampling-probe.sh OUTDIR [PAIRS]}
pairs=${2:-6}
mkdir -p "$out"
{
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    python3 -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)'
    for step in toggle race um; do
        echo "== cupti-toggle.py $step"
        timeout 90 python3 bench/gpu/cupti-toggle.py $step 2>&1 | tail -n 20
        echo "exit ${PIPESTATUS[0]}"
    done
} 2>&1 | tee "$out/toggle.txt"
bash bench/gpu/overhead-modes.sh "$out" "$pairs" launch managed sync gpu 2>&1 | tail -n 30 > "$out/modes.txt"
rm -f "$out/modes"
