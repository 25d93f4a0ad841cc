#!/usr/bin/env bash
# Kernel records that stop coming while CUPTI stays attached (about 1 run in 10 of the long
# forms below on the H200), and the shim's reaction, CUPTI attached anew
# (`cupti::records_stopped`): ROUNDS runs of each of MODES (examples/staged.py, long form)
# under gpuspy's default mode, then one line per run from bench/gpu/stuck_lines.py.
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin bash bench/gpu/stuck.sh OUTDIR [ROUNDS] [MODES]
set -uo pipefail
out=${1:?usage: stuck.sh OUTDIR [ROUNDS] [MODES]}
rounds=${2:-5}
modes=${3:-sync-stalled healthy-pauses torch-compile}
bin=$(realpath "${BIN:-.dev/bin}")
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
for i in $(seq "$rounds"); do
    for mode in $modes; do
        d="$out/dumps/$mode-$i"
        mkdir -p "$d"
        timeout 120 "$bin/gpuspy" run -o "$d" -- python3 examples/staged.py "$mode" --form long \
            > "$d.out" 2> "$d.err"
        echo "$mode $i: exit $?"
        python3 bench/gpu/stuck_lines.py "$d" | tee -a "$out/stuck-lines.txt"
    done
done
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
