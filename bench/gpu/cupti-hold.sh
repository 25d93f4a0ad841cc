#!/usr/bin/env bash
# Does switching CUPTI's traced kinds while the program's threads are in the driver crash a
# PyTorch training loop, and does gpuspy's hold (record::with_calls_held) prevent it?
# Runs bench/gpu/cupti_hold.py for SECONDS, ROUNDS times per configuration, 3 at once:
#   toggle    no shim; a ctypes CUPTI client switches the kinds every 2 ms from a thread
#   unheld    the stress build (bench/gpu/cupti-hold-stress.patch: gpuspy's thread
#             switches every 2 ms) with GPUSPY_STRESS_UNHELD=1: no hold
#   held      the stress build with the hold
#   default   the release build, its own duty cycle (the CUPTI note of each dump printed)
# CONFIGS="held" picks configurations. Usage on the GPU machine: BIN=.dev/bin STRESS=.dev/stress bash bench/gpu/cupti-hold.sh OUT [SECONDS] [ROUNDS]
set -uo pipefail
out=${1:?usage: cupti-hold.sh OUT [SECONDS] [ROUNDS]}
seconds=${2:-30}
rounds=${3:-3}
bin=$(realpath "${BIN:-.dev/bin}")
stress=$(realpath "${STRESS:-.dev/stress}")
mkdir -p "$out"
export PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 GPUSPY_FLUSH_S=0
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)," \
    "torch $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'), ${seconds} s per run"
one() { # one CONFIG ROUND
    local pre="" args="" env=()
    case $1 in
    toggle) args=toggle ;;
    unheld) pre=$stress/libgpuspy.so env=(GPUSPY_STRESS_SWITCH_MS=2 GPUSPY_STRESS_UNHELD=1) ;;
    held) pre=$stress/libgpuspy.so env=(GPUSPY_STRESS_SWITCH_MS=2) ;;
    default) pre=$bin/libgpuspy.so ;;
    esac
    local dumps="$out/$1-$2.dumps" err="$out/$1-$2.err"
    mkdir -p "$dumps"
    local said
    said=$(env "${env[@]}" LD_PRELOAD="$pre" GPUSPY_OUT="$dumps" \
        timeout $((seconds + 60)) python3 bench/gpu/cupti_hold.py "$seconds" $args 2>"$err")
    local rc=$?
    local note=""
    [ -n "$pre" ] && note=$(python3 -c 'import glob, json, sys
for f in glob.glob(sys.argv[1] + "/gpuspy-*.json"):
    print(json.load(open(f))["gpu"]["cupti"]["note"])' "$dumps" 2>/dev/null)
    echo "$1 round $2: exit $rc ${said:-no output}${note:+ | $note}"
    [ "$rc" = 0 ] || grep -m 3 -A 4 "Fatal Python error\|Current thread\|Thread 0x" "$err" | head -n 12 | sed 's/^/    /'
}
for config in ${CONFIGS:-toggle unheld held default}; do
    for round in $(seq "$rounds"); do
        one "$config" "$round" &
        if [ $((round % 3)) = 0 ]; then wait; fi
    done
    wait
done
