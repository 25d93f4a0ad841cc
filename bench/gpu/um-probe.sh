#!/usr/bin/env bash
# What the unified-memory counters see of examples/staged.py's managed-memory loops, under
# the default (sampled counters) and under GPUSPY_CUPTI=full (on throughout), short and
# long, fault-heavy and prefetched; plus bench/gpu/um_steps.py's per-step times without
# gpuspy. Each dump's counters per window are printed by bench/gpu/um_windows.py.
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin bash bench/gpu/um-probe.sh OUTDIR [ROUNDS]
set -uo pipefail
out=${1:?usage: um-probe.sh OUTDIR [ROUNDS]}
rounds=${2:-1}
bin=$(realpath "${BIN:-.dev/bin}")
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
{
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
python3 -c 'import cupy; print("cupy", cupy.__version__)'
python3 bench/gpu/um_steps.py 20
} 2>&1 | tee "$out/um-steps.txt"
for r in $(seq 1 "$rounds"); do
    for cupti in default full; do
        for form in short long; do
            for mode in um-fault-heavy um-fixed; do
                d="$out/dumps/$r/$cupti/$form/$mode"
                mkdir -p "$d"
                if [[ $cupti == full ]]; then export GPUSPY_CUPTI=full; else unset GPUSPY_CUPTI; fi
                timeout 120 "$bin/gpuspy" run -o "$d" -- python3 examples/staged.py "$mode" --form "$form" \
                    > "$d.out" 2> "$d.err"
                echo "$r $cupti $form $mode: exit $? $(grep -E '^(loop|second_half)_s' "$d.out" | tr '\n' ' ')"
                python3 bench/gpu/um_windows.py "$d"/*.json
            done
        done
    done
done 2>&1 | tee "$out/um-probe.txt"
unset GPUSPY_CUPTI
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
