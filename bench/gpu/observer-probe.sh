#!/usr/bin/env bash
# How much recording the GPU side changes the short sync-stalled loop that gpuspy judges
# (bench/results/gpu-2026-12-01-run14-observer): examples/staged.py's short forms (MODES, default
# sync-stalled and sync-fixed) with no shim (`none`), under `gpuspy run` by default
# (`sampled`), with CUPTI recording all the time (`full`), with CUPTI off (`nvml`) and
# with CUPTI and NVML off (`host`): CONFIGS, default `none sampled full`, in rotating
# order. Each run's loop_s and second_half_s go to raw.txt; the dumps of the runs under
# gpuspy to dumps.tar.gz, to be re-diagnosed by any CLI (gpuspy report --json: the steady
# state's idle after syncs).
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin [CONFIGS=...] [MODES=...] bash bench/gpu/observer-probe.sh OUTDIR ROUNDS
set -uo pipefail
out=${1:?usage: observer-probe.sh OUTDIR ROUNDS}
rounds=${2:?usage: observer-probe.sh OUTDIR ROUNDS}
bin=$(realpath "${BIN:-.dev/bin}")
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
mkdir -p "$out/dumps"
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee "$out/raw.txt"
one() {
    local cfg=$1 mode=$2 round=$3 run=()
    local d="$out/dumps/$round-$mode-$cfg"
    case $cfg in
        sampled) run=("$bin/gpuspy" run -o "$d" --) ;;
        full) run=(env GPUSPY_CUPTI=full "$bin/gpuspy" run -o "$d" --) ;;
        nvml) run=(env GPUSPY_CUPTI=0 "$bin/gpuspy" run -o "$d" --) ;;
        host) run=(env GPUSPY_CUPTI=0 GPUSPY_NVML_MS=0 "$bin/gpuspy" run -o "$d" --) ;;
    esac
    local times
    times=$(timeout 120 "${run[@]}" python3 examples/staged.py "$mode" --form short 2>/dev/null |
        awk '/^(loop|second_half)_s/ {printf "%s %s ", $1, $2}')
    echo "$round $mode $cfg ${times:-fail}"
}
read -ra configs <<< "${CONFIGS:-none sampled full}"
read -ra modes <<< "${MODES:-sync-stalled sync-fixed}"
n=${#configs[@]}
for i in $(seq 1 "$rounds"); do
    for j in $(seq 0 $((n - 1))); do
        for mode in "${modes[@]}"; do one "${configs[(i + j) % n]}" "$mode" "$i"; done
    done
done | tee -a "$out/raw.txt"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
