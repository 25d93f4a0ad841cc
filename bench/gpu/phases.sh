#!/usr/bin/env bash
# Issue 13 on a GPU: every workload of examples/staged.py in its short form (a loop of at
# most ~0.5 s after a realistic set-up) and its long form (>= 5 s), under gpuspy, then the
# table of bench/gpu/phases_table.py: the first finding against the intended one, and
# each problem's predicted impact against the time its fix saves.
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin bash bench/gpu/phases.sh OUTDIR [FORMS] [MODES]
set -uo pipefail
out=${1:?usage: phases.sh OUTDIR [FORMS] [MODES]}
forms=${2:-short long}
modes=${3:-launch-bound launch-fixed sync-stalled sync-fixed sync-host sync-host-fixed pageable-memcpy pageable-fixed alloc-churn alloc-fixed input-starved input-fixed um-fault-heavy um-fixed triton-small-grid triton-grid-fixed slow-startup slow-startup-fixed torch-compile torch-compile-eager healthy-matmul healthy-graph healthy-pauses}
bin=$(realpath "${BIN:-.dev/bin}")
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
# torch-compile runs with torch.compile's cache warm, as on any run after a machine's
# first (cold, its compile took 12 s of a 39 s short run, bench/results/gpu-2026-12-01-
# run10-check; warm, 7-11 s). One run without gpuspy warms it.
if [[ " $modes " == *" torch-compile "* ]]; then
    python3 examples/staged.py torch-compile --form short > /dev/null 2>&1
    echo "warmed torch.compile's cache: exit $?"
fi
for form in $forms; do
    for mode in $modes; do
        d="$out/dumps/$form/$mode"
        mkdir -p "$d"
        start=$(date +%s%N)
        timeout 120 "$bin/gpuspy" run -o "$d" -- python3 examples/staged.py "$mode" --form "$form" \
            > "$d.out" 2> "$d.err"
        echo "$form $mode: exit $? wall $((($(date +%s%N) - start) / 1000000)) ms $(grep -E '^(loop|second_half|cuda)_s' "$d.out" | tr '\n' ' ')"
    done
done
for form in $forms; do
    echo "== $form"
    python3 bench/gpu/phases_table.py "$out/dumps/$form" "$bin/gpuspy"
done | tee "$out/phases-table.md"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
