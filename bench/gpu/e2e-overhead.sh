#!/usr/bin/env bash
# What the shim costs a real program end to end: each workload's loop time (`loop_s`, which
# examples/staged.py and examples/reallib.py print) without the shim and with it
# (LD_PRELOAD, default settings: CUPTI sampled, NVML on), one process per run, PAIRS rounds
# per workload in alternating order (plain first in odd rounds, the shim first in even
# ones). bench/gpu/paired_summary.py then prints per workload the medians, the median of
# the paired relative differences and its sign-test 90 % interval.
# CONFIGS (default "none shim") adds settings to tell the costs apart: `nocupti` is the
# shim with GPUSPY_CUPTI=0, `bare` the shim with CUPTI and NVML off, `detach` and `full`
# the shim with GPUSPY_CUPTI set to those. Each round runs them
# all, in an order rotated by one from the round before.
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin [CONFIGS="none shim nocupti"] [KEEP_DUMPS=1] bash bench/gpu/e2e-overhead.sh OUTDIR [PAIRS] [WORKLOAD...]
# A WORKLOAD is SCRIPT:MODE[:FORM], SCRIPT one of staged and reallib (examples/*.py); the
# default set is the eager launch-bound loop, managed memory, pageable copies, .item()
# syncs, bf16 matmuls and a batch-1 transformers generate() loop, short forms.
set -uo pipefail
out=${1:?usage: e2e-overhead.sh OUTDIR [PAIRS] [WORKLOAD...]}
pairs=${2:-9}
shift 2 2>/dev/null || shift $#
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(staged:launch-bound staged:um-fault-heavy
    staged:pageable-memcpy staged:sync-stalled staged:healthy-matmul reallib:hf-generate)
shim=$(realpath "${BIN:-.dev/bin}")/libgpuspy.so
mkdir -p "$out"
dumps=$(mktemp -d)
export GPUSPY_FLUSH_S=0 GPUSPY_OUT="$dumps" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), shim $(sha256sum "$shim" | cut -c1-12), $pairs pairs"
read -ra configs <<< "${CONFIGS:-none shim}"
one() { # one CONFIG WORKLOAD ROUND: prints WORKLOAD CONFIG ROUND LOOP_MS (or fail)
    local script mode form pre=$shim settings=()
    IFS=: read -r script mode form <<< "$2"
    case $1 in
        none) pre="" ;;
        shim) ;;
        nocupti) settings=(GPUSPY_CUPTI=0) ;;
        bare) settings=(GPUSPY_CUPTI=0 GPUSPY_NVML_MS=0) ;;
        detach | full) settings=(GPUSPY_CUPTI="$1") ;;
        *) echo "e2e-overhead.sh: unknown config $1 (none, shim, nocupti, bare, detach, full)" >&2; exit 2 ;;
    esac
    rm -rf "${dumps:?}"/*
    local s
    s=$(env "${settings[@]}" LD_PRELOAD="$pre" timeout 120 python3 "examples/$script.py" "$mode" --form "${form:-short}" 2>>"$out/stderr.txt" |
        awk '/^loop_s / {printf "%.3f", $2 * 1000}')
    # KEEP_DUMPS=1 keeps each run's dump, for what CUPTI recorded (its slots, its cost).
    [ "${KEEP_DUMPS:-0}" = 1 ] && [ -n "$pre" ] && mkdir -p "$out/dumps/$2-$1-$3" && cp -r "$dumps"/. "$out/dumps/$2-$1-$3/"
    echo "$2 $1 $3 ${s:-fail}"
}
for w in "${workloads[@]}"; do
    for r in $(seq "$pairs"); do
        for i in "${!configs[@]}"; do
            one "${configs[(i + r - 1) % ${#configs[@]}]}" "$w" "$r"
        done
    done
done | tee "$out/e2e-runs.txt"
python3 bench/gpu/paired_summary.py "$out/e2e-runs.txt" | tee "$out/e2e-summary.txt"
