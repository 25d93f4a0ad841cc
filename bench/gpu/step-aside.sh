#!/usr/bin/env bash
# torch.profiler started over the second half of the paced loop (bench/gpu/truth.py
# paced-late, 400 steps) with gpuspy preloaded: N runs per shim build, the builds
# alternating, each run's exit status, the profiler's kernel count (800 when it got every
# kernel) and PyTorch's internal asserts, then the count of clean runs per build.
# Usage on the GPU machine: bash bench/gpu/step-aside.sh OUTDIR N LIBGPUSPY[:LIBGPUSPY...]
# (each build named by its folder, e.g. .dev/bin/libgpuspy.so is "bin").
set -uo pipefail
out=${1:?usage: step-aside.sh OUTDIR N LIB[:LIB...]}
n=${2:?usage: step-aside.sh OUTDIR N LIB[:LIB...]}
IFS=: read -ra libs <<< "${3:?usage: step-aside.sh OUTDIR N LIB[:LIB...]}"
mkdir -p "$out"
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
python3 -c 'import torch; print("torch", torch.__version__)'
for i in $(seq "$n"); do
    for lib in "${libs[@]}"; do
        name=$(basename "$(dirname "$lib")")
        d="$out/dumps/$name-$i"
        mkdir -p "$d"
        GPUSPY_OUT="$d" LD_PRELOAD="$(realpath "$lib")" PYTHONFAULTHANDLER=1 \
            timeout 100 python3 bench/gpu/truth.py paced-late 400 > "$d.txt" 2>&1
        rc=$?
        kernels=$(grep -E '^torch_kernels' "$d.txt" | cut -d' ' -f2)
        echo "$name run $i: exit $rc torch_kernels ${kernels:-none} asserts $(grep -c 'INTERNAL ASSERT' "$d.txt")"
    done
done | tee "$out/runs.txt"
for lib in "${libs[@]}"; do
    name=$(basename "$(dirname "$lib")")
    echo "$name: clean $(grep -c "^$name run .*exit 0 torch_kernels 800 asserts 0" "$out/runs.txt") of $n"
done
