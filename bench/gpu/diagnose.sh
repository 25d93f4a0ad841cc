#!/usr/bin/env bash
# Issue 4 on a GPU: each workload of examples/staged.py under gpuspy, its first finding
# against the expected one, and for six problems the predicted impact against the
# speed-up measured when the suggested fix is applied. The last three pairs (input-starved,
# um-fault-heavy, small-grid) need the CUPTI collection and have not run yet.
# Usage on the GPU machine, from the repository root: bash bench/gpu/diagnose.sh OUTDIR
set -uo pipefail
out=${1:?usage: diagnose.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
py=python3
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
mkdir -p "$out/dumps"
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
for mode in launch-bound sync-stalled sync-fixed pageable-memcpy pageable-fixed alloc-churn alloc-fixed slow-startup healthy-matmul healthy-graph input-starved input-fixed um-fault-heavy um-fixed small-grid small-grid-fixed; do
    env=()
    [ "$mode" = alloc-churn ] && env=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
    env "${env[@]}" "$bin/gpuspy" run --json "$out/dumps/$mode.report.json" -o "$out/dumps/$mode" -- $py examples/staged.py "$mode" \
        > "$out/dumps/$mode.out" 2> "$out/dumps/$mode.err"
    echo "$mode: exit $? $(grep loop_s "$out/dumps/$mode.out")"
done
$py bench/gpu/diagnose_table.py "$out/dumps" "$bin/gpuspy" | tee "$out/diagnose-table.md"
for mode in sync-stalled pageable-memcpy alloc-churn healthy-matmul; do
    echo "== $mode"; "$bin/gpuspy" report "$out/dumps/$mode" | sed -n '/^Verdict/,/^Driver API/p'
done > "$out/diagnose-reports.txt"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
