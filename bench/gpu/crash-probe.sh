#!/usr/bin/env bash
# Whether a program that fails under gpuspy fails without it too, and whether CUPTI is
# involved: each WORKLOAD (MODE:FORM of examples/reallib.py) run plain, under the shim with
# its defaults, and under the shim with GPUSPY_CUPTI=0, with Python's fault handler on so a
# SIGSEGV prints the Python stack. Prints per run the exit status, loop_s and the last lines
# of stderr; keeps each run's stderr in OUTDIR (one level deep, so it comes back).
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin bash bench/gpu/crash-probe.sh OUTDIR MODE:FORM...
set -uo pipefail
out=${1:?usage: crash-probe.sh OUTDIR MODE:FORM...}
shift
shim=$(realpath "${BIN:-.dev/bin}")/libgpuspy.so
mkdir -p "$out"
dumps=$(mktemp -d)
export PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 GPUSPY_FLUSH_S=0 GPUSPY_OUT="$dumps"
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), shim $(sha256sum "$shim" | cut -c1-12)"
for w in "$@"; do
    IFS=: read -r mode form <<< "$w"
    for config in plain shim shim-nocupti; do
        pre="" cupti=""
        [ "$config" != plain ] && pre=$shim
        [ "$config" = shim-nocupti ] && cupti=0
        err="$out/$mode-$form-$config.err"
        start=$(date +%s%N)
        loop=$(LD_PRELOAD="$pre" GPUSPY_CUPTI="$cupti" timeout 120 python3 examples/reallib.py "$mode" --form "$form" 2>"$err" |
            awk '/^loop_s / {print $2}')
        rc=${PIPESTATUS[0]}
        echo "$mode $form $config: exit $rc loop_s ${loop:-none} wall $((($(date +%s%N) - start) / 1000000)) ms"
        [ "$rc" = 0 ] || tail -n 15 "$err" | sed 's/^/    /'
    done
done
