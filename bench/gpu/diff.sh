#!/usr/bin/env bash
# Issue 5 on a GPU: two configurations of one PyTorch workload (the caching allocator on,
# and off with PYTORCH_NO_CUDA_MEMORY_CACHING=1), five runs each, plus a second set of five
# runs of the first configuration. `gpuspy diff` must report the allocator change and raise
# no alarm between the two sets of the same configuration.
# Usage on the GPU machine, from the repository root: bash bench/gpu/diff.sh OUTDIR
set -uo pipefail
out=${1:?usage: diff.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
for i in 1 2 3 4 5; do
    GPUSPY_OUT="$out/runs/cache-on/run$i" LD_PRELOAD="$bin/libgpuspy.so" python3 examples/staged.py alloc-fixed
    GPUSPY_OUT="$out/runs/cache-on-again/run$i" LD_PRELOAD="$bin/libgpuspy.so" python3 examples/staged.py alloc-fixed
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 GPUSPY_OUT="$out/runs/cache-off/run$i" LD_PRELOAD="$bin/libgpuspy.so" python3 examples/staged.py alloc-churn
done
echo "== diff: the same configuration twice (expect exit 0)"
"$bin/gpuspy" diff "$out/runs/cache-on" "$out/runs/cache-on-again"; echo "exit $?"
echo "== diff: caching allocator on -> off (expect exit 1)"
"$bin/gpuspy" diff --markdown "$out/diff-summary.md" "$out/runs/cache-on" "$out/runs/cache-off"; echo "exit $?"
tar -C "$out" -czf "$out/runs.tar.gz" runs && rm -rf "$out/runs"
