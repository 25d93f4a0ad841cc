#!/usr/bin/env bash
# Issue 19 on a GPU: gpuspy's GPM figures (SM active, occupancy, tensor, DRAM bandwidth)
# for the workloads of bench/gpu/gpm.py, with `nvidia-smi dmon --gpm-metrics` sampling the
# same loops once a second; then the launch-bound loop with NVML (and so GPM) on and off.
# Usage on the GPU machine, from the repository root: bash bench/gpu/gpm.sh OUTDIR
# (BIN: the folder holding gpuspy and libgpuspy.so, default .dev/gpm).
set -uo pipefail
out=${1:?usage: gpm.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/gpm}")
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
mkdir -p "$out/dumps"
log="$out/log.txt"
{
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    python3 -c 'import torch, triton; print("torch", torch.__version__, "CUDA", torch.version.cuda, "triton", triton.__version__)'
    nvidia-smi dmon -h 2>&1 | grep -i -A4 gpm
    header=$(ls /usr/local/cuda/include/nvml.h /usr/local/cuda*/targets/*/include/nvml.h 2>/dev/null | head -1)
    echo "== $header"
    grep -E "NVML_GPM_METRIC_(SM_UTIL|SM_OCCUPANCY|ANY_TENSOR_UTIL|DFMA_TENSOR_UTIL|HMMA_TENSOR_UTIL|IMMA_TENSOR_UTIL|DRAM_BW_UTIL|PCIE_TX_PER_SEC|PCIE_RX_PER_SEC|NVLINK_TOTAL_RX_PER_SEC|NVLINK_TOTAL_TX_PER_SEC|MAX) |NVML_GPM_METRICS_GET_VERSION|NVML_GPM_SUPPORT_VERSION" "$header"
} > "$log" 2>&1
# Metric ids as NVML's: 2 SM active, 3 occupancy, 5 any tensor, 7 HMMA, 10 DRAM bandwidth.
workload() {
    local mode=$1; shift
    nvidia-smi dmon --gpm-metrics 2,3,5,7,10 -d 1 > "$out/dumps/$mode.dmon" 2>&1 &
    local dmon=$!
    "$bin/gpuspy" run -o "$out/dumps/$mode" -- python3 bench/gpu/gpm.py "$mode" "$@" \
        > "$out/dumps/$mode.out" 2>&1
    echo "$mode: exit $? $(grep -E 'loop_s|iterations' "$out/dumps/$mode.out" | tr '\n' ' ')" >> "$log"
    kill "$dmon"; wait "$dmon" 2>/dev/null
}
workload small-grid-4
iterations=$(awk '/^iterations/ {print $2}' "$out/dumps/small-grid-4.out")
workload small-grid-full "${iterations:-10}"
workload matmul-bf16
workload matmul-fp32
workload elementwise-fp32
for round in 1 2 3; do
    for nvml_ms in 100 0; do
        GPUSPY_NVML_MS=$nvml_ms "$bin/gpuspy" run -o "$out/dumps/launch-$nvml_ms-$round" -- \
            python3 examples/staged.py launch-bound > "$out/dumps/launch-$nvml_ms-$round.out" 2>&1
        echo "launch-bound NVML_MS=$nvml_ms round $round: $(grep loop_s "$out/dumps/launch-$nvml_ms-$round.out")" >> "$log"
    done
done
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
