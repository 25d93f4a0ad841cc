#!/usr/bin/env bash
# What gpuspy's default costs a DDP training step (issue 14), on two GPUs: bench/multi/ddp.py
# under torchrun, without the shim and under `gpuspy run`, in rotating order, one job each;
# the value is rank 0's own loop time (it excludes start-up). Summary as overhead-modes.sh's
# (bench/gpu/paired_summary.py). From the repository root, with the release gpuspy and
# libgpuspy.so in $BIN (.dev/bin):
#   bash bench/gpu/overhead-ddp.sh OUTDIR [PAIRS] [STEPS]
# DEADLINE_S (default 500) starts no round after that many seconds, so a device call's
# 10 minutes always end with the summary and the archive.
# CONFIGS="none default" by default; `full` is GPUSPY_CUPTI=full, any other NAME the
# default mode of .dev/variants/NAME/libgpuspy.so. A job that fails is listed as `fail`
# with how each rank ended; Python's fault handler prints the stacks of a rank that
# segfaults (2 of 5 jobs lost a rank under 9b47d94's default,
# bench/results/gpu-2026-11-30-run9-ddp).
set -uo pipefail
out=${1:?usage: overhead-ddp.sh OUTDIR [PAIRS] [STEPS]}
pairs=${2:-8}
steps=${3:-300}
bin=$(realpath "${BIN:-.dev/bin}")
read -ra configs <<< "${CONFIGS:-none default}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=4
export PYTHONFAULTHANDLER=1
mkdir -p "$out"
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c), $pairs rounds of $steps steps: ${configs[*]}"
job() { # job CONFIG ROUND
    local log="$out/$1-$2.log" pre=() mode="" shim="$bin/libgpuspy.so"
    case $1 in none) ;; default) ;; full) mode=full ;;
        *) shim=$(realpath "${VARIANTS:-.dev/variants}/$1/libgpuspy.so") || exit 1 ;; esac
    [ "$1" = none ] || pre=(env GPUSPY_SHIM="$shim" GPUSPY_CUPTI=$mode "$bin/gpuspy" run -o "$out/dumps-$1-$2" --)
    timeout 90 "${pre[@]}" torchrun --standalone --nproc-per-node 2 bench/multi/ddp.py --steps "$steps" > "$log" 2>&1
    local loop_s excess
    # The ranks' lines can share a line of the log (their prints interleave).
    loop_s=$(grep -o "rank 0: steps [0-9]* loop_s [0-9.]*" "$log" | awk '{print $NF; exit}')
    excess=$(grep -o "rank 0: excess_pct [0-9.-]*" "$log" | awk '{print $NF; exit}')
    # The fields paired_summary.py reads: no kernel, CPU or stall figures here, the excess last.
    echo "ddp $1 $2 ${loop_s:-fail} - - - - - - - ${excess:--}"
    [ -n "$loop_s" ] || grep -ho "exitcode *: -*[0-9]*\|Signal [0-9]* ([A-Z]*)\|Fatal Python error: .*" "$log" | sort | uniq -c | sed 's/^/#   /'
}
n=${#configs[@]}
for r in $(seq "$pairs"); do
    [ "$SECONDS" -lt "${DEADLINE_S:-500}" ] || { echo "# deadline: $((r - 1)) rounds"; break; }
    for k in $(seq 0 $((n - 1))); do
        job "${configs[$(((r + k) % n))]}" "$r"
    done
done | tee "$out/raw.txt"
python3 bench/gpu/paired_summary.py "$out/raw.txt" | tee "$out/summary.txt"
# The device returns 8 files at most: the logs and dumps travel as one archive.
tar czf "$out/jobs.tgz" -C "$out" $(cd "$out" && ls -d ./*.log ./dumps-* 2>/dev/null) && rm -rf "$out"/*.log "$out"/dumps-*
