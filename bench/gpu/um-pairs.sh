#!/usr/bin/env bash
# What moving the unified-memory counters' first slot costs the program: examples/staged.py's
# managed-memory loop with no shim (`none`), the previous shim (`old`) and this one (`new`),
# both in the default mode and preloaded directly, one process each, in rotating order;
# the loop's own time (loop_s, in ms) of each run goes to RAW.txt, summarised by
# bench/gpu/paired_summary.py (median paired differences against `none`, 90 % intervals).
# Usage on the GPU machine, from the repository root:
#   NEW=.dev/bin OLD=.dev/variants/old bash bench/gpu/um-pairs.sh OUTDIR PAIRS [FORM] [MODE]
set -uo pipefail
out=${1:?usage: um-pairs.sh OUTDIR PAIRS [FORM] [MODE]}
pairs=${2:?usage: um-pairs.sh OUTDIR PAIRS [FORM] [MODE]}
form=${3:-short}
mode=${4:-um-fault-heavy}
new=$(realpath "${NEW:-.dev/bin}")/libgpuspy.so
old=$(realpath "${OLD:-.dev/variants/old}")/libgpuspy.so
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $form $mode" | tee "$out/raw.txt"
one() {
    local cfg=$1 round=$2 preload=()
    case $cfg in new) preload=(env LD_PRELOAD="$new") ;; old) preload=(env LD_PRELOAD="$old") ;; esac
    mkdir -p "$out/dumps/$round-$cfg"
    local loop
    loop=$(GPUSPY_OUT="$out/dumps/$round-$cfg" "${preload[@]}" timeout 120 python3 examples/staged.py "$mode" --form "$form" 2>/dev/null |
        awk '/^loop_s/ {print $2 * 1000}')
    echo "$mode-$form $cfg $round ${loop:-fail}"
}
configs=(none old new)
for i in $(seq 1 "$pairs"); do
    for j in 0 1 2; do one "${configs[(i + j) % 3]}" "$i"; done
done | tee -a "$out/raw.txt"
python3 bench/gpu/paired_summary.py "$out/raw.txt" | tee "$out/summary.txt"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
