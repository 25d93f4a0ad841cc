#!/usr/bin/env bash
# Issue 6 on two GPUs: a DDP job (bench/multi/ddp.py) under torchrun, profiled by gpuspy,
# once even, once with rank 1's data loading slowed by DELAY_MS per step, and once with
# batches of 8 so that the all-reduces dominate (comm); plus the even job without gpuspy
# for its step time. RUNS="comm" runs only the named ones. From the repository root on a machine with
# two GPUs, with the release gpuspy and libgpuspy.so in $BIN (.dev/bin):
#   bash bench/multi/ddp.sh OUTDIR
set -uo pipefail
out=${1:?usage: ddp.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
steps=${STEPS:-200} delay=${DELAY_MS:-20}
# NVLink multicast stays off (the lent machines require it; children inherit these).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
mkdir -p "$out/dumps"
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c)"
nvidia-smi topo -m | head -4
nvidia-smi nvlink -s -i 0 | head -3
job=(timeout 240 torchrun --standalone --nproc-per-node 2 bench/multi/ddp.py --steps "$steps")
runs=${RUNS:-plain even slow comm}
if [[ " $runs " == *" plain "* ]]; then
    echo "== plain (no gpuspy)"
    "${job[@]}"
fi
for run in even slow comm; do
    [[ " $runs " == *" $run "* ]] || continue
    echo "== $run under gpuspy"
    case $run in
        even) args=() ;;
        slow) args=(--delay-ms "$delay") ;;
        comm) args=(--batch 8) ;;
    esac
    "$bin/gpuspy" run -o "$out/dumps/$run" -- "${job[@]}" "${args[@]}" > "$out/dumps/$run.log" 2>&1
    echo "exit $?"; grep -E "^rank|^ddp|^expected|^world|^gpuspy" "$out/dumps/$run.log"
    ls "$out/dumps/$run"
    "$bin/gpuspy" report "$out/dumps/$run" > "$out/$run.report.txt" 2>&1
    "$bin/gpuspy" report --json "$out/dumps/$run" > "$out/dumps/$run.json" 2>&1
done
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
