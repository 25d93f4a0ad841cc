#!/usr/bin/env bash
# What each CUPTI mode costs, per workload class: no shim, the shim with GPUSPY_CUPTI=0
# (host-side recording and NVML), the default (sampled) and GPUSPY_CUPTI=full. Each pair
# round runs the configurations of one workload in rotating order, one process each
# (bench/gpu/modes.c: plain driver API, a loop of about 1.5 s), unpinned as programs run
# (CORE=N pins the whole process to core N: then gpuspy's threads compete with the loop
# for that core, which short pinned processes turned into +8 % of start-up work), and
# records the loop's own ns per iteration, its stalls (iterations over a threshold: where
# CUPTI's switches hold the program), its excess (time above the median iteration, in %:
# what rare events cost, measured within the process) and the CPU time of gpuspy's
# threads; with the
# shim it also reads the dump's kernel count and sampling factor. The summary
# (bench/gpu/paired_summary.py) gives medians, paired differences against no shim and
# their 90 % confidence intervals.
#   bash bench/gpu/overhead-modes.sh OUTDIR [PAIRS] [WORKLOADS...]
# Defaults: 25 pairs of launch managed sync copy gpu; CONFIGS="none off default full".
# Config `alt`: the default mode of another build, ALT_BIN/libgpuspy.so, in the same
# rotation; any other config NAME: the default mode of .dev/variants/NAME/libgpuspy.so
# (VARIANTS=DIR for another folder), so several candidate builds share one rotation. The last dump of each workload and config is kept as dump-WORKLOAD-CONFIG.json.
# Needs .dev/bin/libgpuspy.so (BIN=...) built with `cargo build --release`. modes.c has no
# libcudart beside which the shim would find libcupti: GPUSPY_CUPTI_PATH names one (by
# default the toolkit's, else the pip wheel's that PyTorch loads), and a run with the shim
# whose dump says CUPTI was off where it should be on stops the script (a run without CUPTI
# would measure nothing of CUPTI's cost).
set -uo pipefail
out=${1:?usage: overhead-modes.sh OUTDIR [PAIRS] [WORKLOADS...]}
pairs=${2:-25}
shift 2 2>/dev/null || shift $#
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(launch managed sync copy gpu)
bin=$(realpath "${BIN:-.dev/bin}")
shim="$bin/libgpuspy.so"
pin=()
[ -n "${CORE:-}" ] && pin=(taskset -c "$CORE")
read -ra configs <<< "${CONFIGS:-none off default full}"
if [ -z "${GPUSPY_CUPTI_PATH:-}" ]; then
    GPUSPY_CUPTI_PATH=$(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* 2>/dev/null | head -1)
    [ -n "$GPUSPY_CUPTI_PATH" ] || GPUSPY_CUPTI_PATH=$(python3 -c '
import glob, nvidia
print(sorted(p for d in nvidia.__path__ for p in glob.glob(d + "/**/libcupti.so*", recursive=True))[0])')
fi
export GPUSPY_CUPTI_PATH
mkdir -p "$out"
dumps=$(mktemp -d)
export GPUSPY_FLUSH_S=0 GPUSPY_OUT="$dumps"
cc -O2 -o "$out/modes" bench/gpu/modes.c -ldl || exit 1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), ${CORE:+core $CORE, }$pairs pairs, ${configs[*]}: ${workloads[*]}; CUPTI $GPUSPY_CUPTI_PATH"
one() { # one CONFIG WORKLOAD ROUND
    local pre="" mode=""
    case $1 in none) ;; off) pre=$shim mode=0 ;; default) pre=$shim ;; full) pre=$shim mode=full ;;
        alt) pre=$(realpath "${ALT_BIN:?config alt needs ALT_BIN}")/libgpuspy.so ;;
        *) pre=$(realpath "${VARIANTS:-.dev/variants}/$1/libgpuspy.so") || exit 1 ;; esac
    rm -f "$dumps"/*.json
    local ns launches own_cpu stalls excess
    read -r ns launches own_cpu excess stalls < <(GPUSPY_CUPTI=$mode LD_PRELOAD="$pre" timeout 60 "${pin[@]}" "$out/modes" "$2" |
        awk '/loop_ns_per_iter/ {ns = $2} /launches/ {n = $2} /^thread_cpu_ms gpuspy/ {own += $3}
             /^stalls/ {s = $2 " " $3 " " $4} /^excess_pct/ {x = $2} END {print ns, n, own + 0, x, s}')
    local kernels=- factor=-
    if [ -n "$pre" ] && ls "$dumps"/*.json >/dev/null 2>&1; then
        local read
        read=$(python3 - "$dumps" "$1" <<'PY'
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
g = d.get("gpu") or {}
cupti = g.get("cupti") or {}
if sys.argv[2] != "off" and not cupti.get("active"):
    sys.exit(f"gpuspy: {sys.argv[2]} ran without CUPTI ({cupti.get('note')})")
a = (g.get("devices") or [{}])[0].get("activity") or {}
print(a.get("kernels", "-"), (a.get("sampled") or {}).get("factor", 1.0) if a else "-")
PY
        ) || exit 1
        read -r kernels factor <<< "$read"
        cp "$dumps"/*.json "$out/dump-$2-$1.json"
    fi
    echo "$2 $1 $3 ${ns:-fail} $kernels $factor ${launches:-0} ${own_cpu:-0} ${stalls:-0 0 0} ${excess:-0}"
}
n=${#configs[@]}
for r in $(seq "$pairs"); do
    for w in "${workloads[@]}"; do
        for k in $(seq 0 $((n - 1))); do
            one "${configs[$(((r + k) % n))]}" "$w" "$r"
        done
    done
done | tee "$out/raw.txt"
rm -rf "$dumps"
python3 bench/gpu/paired_summary.py "$out/raw.txt" | tee "$out/summary.txt"
