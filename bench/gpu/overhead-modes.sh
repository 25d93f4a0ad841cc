#!/usr/bin/env bash
# What each CUPTI mode costs, per workload class: no shim, the shim with GPUSPY_CUPTI=0
# (host-side recording and NVML), the default (sampled) and GPUSPY_CUPTI=full. Each pair
# round runs the four configurations of one workload in rotating order, pinned to one
# core, one process each (bench/gpu/modes.c: plain driver API, ~0.3 s a process), and
# records the loop's own ns per iteration; with the shim it also reads the dump's kernel
# count and sampling factor. The summary gives, per workload and configuration, the
# median ns per iteration, the median of the paired relative differences against no
# shim, and a distribution-free 90 % confidence interval of that median (order
# statistics of the paired differences, sign-test bounds).
#   bash bench/gpu/overhead-modes.sh OUTDIR [PAIRS] [WORKLOADS...]
# Defaults: 25 pairs of launch managed sync copy gpu, about 6 minutes on the H200.
# Needs .dev/bin/libgpuspy.so (BIN=...) built with `cargo build --release`.
set -uo pipefail
out=${1:?usage: overhead-modes.sh OUTDIR [PAIRS] [WORKLOADS...]}
pairs=${2:-25}
shift 2 2>/dev/null || shift $#
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(launch managed sync copy gpu)
bin=$(realpath "${BIN:-.dev/bin}")
shim="$bin/libgpuspy.so"
core=${CORE:-3}
mkdir -p "$out"
dumps=$(mktemp -d)
export GPUSPY_FLUSH_S=0 GPUSPY_OUT="$dumps"
cc -O2 -o "$out/modes" bench/gpu/modes.c -ldl || exit 1
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), core $core, $pairs pairs: ${workloads[*]}"
one() { # one CONFIG WORKLOAD ROUND
    local pre="" mode=""
    case $1 in none) ;; off) pre=$shim mode=0 ;; default) pre=$shim ;; full) pre=$shim mode=full ;; esac
    rm -f "$dumps"/*.json
    local ns launches
    read -r ns launches < <(GPUSPY_CUPTI=$mode LD_PRELOAD="$pre" timeout 60 taskset -c "$core" "$out/modes" "$2" |
        awk '/loop_ns_per_iter/ {ns = $2} /launches/ {n = $2} END {print ns, n}')
    local kernels=- factor=-
    if [ -n "$pre" ] && ls "$dumps"/*.json >/dev/null 2>&1; then
        read -r kernels factor < <(python3 - "$dumps" <<'PY'
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
a = ((d.get("gpu") or {}).get("devices") or [{}])[0].get("activity") or {}
print(a.get("kernels", "-"), (a.get("sampled") or {}).get("factor", 1.0) if a else "-")
PY
        )
    fi
    echo "$2 $1 $3 ${ns:-fail} $kernels $factor ${launches:-0}"
}
configs=(none off default full)
for r in $(seq "$pairs"); do
    for w in "${workloads[@]}"; do
        for k in 0 1 2 3; do
            one "${configs[$(((r + k) % 4))]}" "$w" "$r"
        done
    done
done | tee "$out/raw.txt"
rm -rf "$dumps"
python3 - "$out/raw.txt" <<'PY' | tee "$out/summary.txt"
import collections, math, statistics, sys
runs = collections.defaultdict(dict)
kernels = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, c, r, ns, k, f, launched = line.split()
    if ns != "fail":
        runs[w, r][c] = float(ns)
    if k != "-":
        kernels[w, c].append((int(k) / max(int(launched), 1), f))

def sign_test_ci(d, level=0.90):
    """Order statistics bounding the median of d with at least `level` coverage."""
    d, n = sorted(d), len(d)
    k = 0
    while k + 1 <= n // 2:
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
        if 2 * tail > 1 - level:
            break
        k += 1
    return (d[k - 1], d[n - k]) if k > 0 else (d[0], d[-1])

print("workload config   median ns/iter   paired diff vs none: median [90% CI]   n   kernels in dump / launched, factor (medians)")
for w in dict.fromkeys(w for w, _ in runs):
    rounds = [v for (ww, _), v in runs.items() if ww == w]
    for c in ("none", "off", "default", "full"):
        ns = [v[c] for v in rounds if c in v]
        d = [100 * (v[c] / v["none"] - 1) for v in rounds if c in v and "none" in v]
        k = kernels.get((w, c), [])
        ks = f"{statistics.median(x for x, _ in k):.4f} {statistics.median(float(f) for _, f in k):.2f}" if k else "-"
        if c == "none" or not d:
            print(f"{w:8} {c:8} {statistics.median(ns):12.0f}")
            continue
        lo, hi = sign_test_ci(d)
        print(f"{w:8} {c:8} {statistics.median(ns):12.0f}   {statistics.median(d):+6.2f}% [{lo:+.2f}, {hi:+.2f}]  {len(d):3}   {ks}")
PY
