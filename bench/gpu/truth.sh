#!/usr/bin/env bash
# GPU-side truth (CUPTI activity, NVML telemetry) checked on a real GPU. From the repository
# root on the GPU machine, with the release gpuspy and libgpuspy.so in $BIN (.dev/bin):
#   bash bench/gpu/truth.sh OUTDIR   (ONLY="3 4" runs only those steps)
# 1. NVML facts in the dump against `nvidia-smi -q`.
# 2. The elementwise loop under gpuspy: kernel records against cuLaunchKernel calls.
# 3. A paced loop (GPU busy about half the time): gpuspy's busy share against
#    torch.profiler's (union of kernel intervals over the activity span), each alone; then
#    torch.profiler with gpuspy present, around everything and over the second half only:
#    torch.profiler's kernel counts must not change.
# 4. Unified memory (CuPy): managed pages touched by host and GPU show faults; the same
#    work on a device array with explicit copies shows none.
# 5. 1e6 launches: peak RSS with and without the shim, and the dump's size.
set -uo pipefail
out=${1:?usage: truth.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
shim="$bin/libgpuspy.so"
mkdir -p "$out/dumps"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 GPUSPY_FLUSH_S=0
py=python3
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }  # ONLY="3 4" runs steps 3 and 4
echo "== date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
$py -c 'import torch, cupy; print("torch", torch.__version__, "cuda", torch.version.cuda, "cupy", cupy.__version__)'

# probe SECONDS CMD...: runs CMD; if it is still running after SECONDS, prints every
# thread's name, kernel wait channel and current syscall, and every Python thread's stack
# (SIGUSR1, registered by truth.py), then kills it. For the known torch.profiler hang.
probe() {
    local limit=$1; shift
    "$@" & local pid=$!
    for _ in $(seq "$limit"); do kill -0 "$pid" 2>/dev/null || { wait "$pid"; return; }; sleep 1; done
    echo "!! still running after ${limit} s: thread states (comm wchan syscall)"
    for t in /proc/$pid/task/*; do
        echo "   $(cat "$t/comm" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null) $(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
    done
    kill -USR1 "$pid"; sleep 2; kill -9 "$pid"; wait "$pid"
}

# summary DUMPDIR KEYS...: the GPU section of the one dump in DUMPDIR, as `key value` lines.
summary() {
    $py - "$@" <<'PY'
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/gpuspy-*.json")[0]))
g = d.get("gpu") or {}
print("nvml", g.get("nvml")); print("cupti", g.get("cupti"))
launch = sum(a["calls"] for a in d["apis"] if a["symbol"].startswith(("cuLaunchKernel", "cuLaunchKernelEx")))
print("launch_calls", launch)
for dev in g.get("devices", []):
    a = dev.get("activity") or {}
    span = (a.get("last_unix_ns", 0) - a.get("first_unix_ns", 0)) or 1
    print("device", dev["ordinal"])
    print("  kernels", a.get("kernels"), "untimed", a.get("untimed_records"), "late", a.get("late_records"), a.get("late_ns"))
    print(f"  busy_share {a.get('busy_ns', 0) / span:.5f}")
    print(f"  kernel_sum_share {a.get('kernel_ns', 0) / span:.5f}")
    print(f"  span_us {span / 1e3:.1f}")
    print("  copies", [(c["kind"], c["memory"], c["count"], c["bytes"], c["ns"]) for c in a.get("copies", [])])
    print("  top", [(k["name"][:60], k["calls"]) for k in a.get("top_kernels", [])[:4]])
    f = dev.get("facts") or {}
    print("  facts", json.dumps({k: f.get(k) for k in ("name", "driver_version", "cuda_driver_version", "vbios_version", "pcie", "ecc_enabled", "persistence_mode", "mig_mode", "power_limit_mw", "sm_count", "max_sm_clock_mhz", "other_processes")}))
    t = dev.get("telemetry") or {}
    print("  telemetry samples", t.get("samples"), "util", t.get("gpu_util_pct"), "sm_clock", t.get("sm_clock_mhz"), "power", t.get("power_mw"), "events", t.get("clock_events"))
print("unified_memory", g.get("unified_memory"))
print("overhead", g.get("cupti_overhead"))
print("dropped", g.get("dropped_records"), "refused", g.get("refused_buffers"), "collector_cpu_ms", g.get("collector_cpu_ns", 0) / 1e6, "start_wait_ms", g.get("start_wait_ns", 0) / 1e6)
PY
}

if want 1; then
echo "== 1. nvidia-smi -q (the facts NVML should give)"
nvidia-smi -q | grep -E "Driver Version|CUDA Version|Product Name|VBIOS|Persistence Mode|PCIe Generation|Max +:|Current +:|Link Width|Ecc Mode|Current +: +(Enabled|Disabled)|Current Power Limit|Enforced Power Limit|MIG Mode" | head -40 | tee "$out/nvidia-smi-q.txt"

fi
if want 2; then
echo "== 2. elementwise loop, 20000 iterations, under gpuspy"
GPUSPY_OUT="$out/dumps/elementwise" LD_PRELOAD="$shim" $py bench/gpu/truth.py elementwise 20000
summary "$out/dumps/elementwise"
"$bin/gpuspy" report "$out/dumps/elementwise" > "$out/report-elementwise.txt" 2>&1; echo "report rc $?"

fi
if want 3; then
echo "== 3. busy share against torch.profiler: the paced loop, 400 steps"
echo "-- (a) gpuspy alone"
GPUSPY_OUT="$out/dumps/paced" LD_PRELOAD="$shim" timeout 150 $py bench/gpu/truth.py paced 400
summary "$out/dumps/paced" | grep -E "cupti|kernels|busy_share|span_us"
echo "-- (b) torch.profiler alone, around everything"
timeout 150 $py bench/gpu/truth.py paced-profile 400
echo "-- (c) torch.profiler around everything, gpuspy present (the program's client comes first)"
GPUSPY_OUT="$out/dumps/paced-profile" LD_PRELOAD="$shim" probe 60 $py bench/gpu/truth.py paced-profile 400
summary "$out/dumps/paced-profile" | grep -E "cupti|kernels|busy_share"
echo "-- (d) torch.profiler over the second half only, gpuspy present (gpuspy steps aside)"
GPUSPY_OUT="$out/dumps/paced-late" LD_PRELOAD="$shim" timeout 150 $py bench/gpu/truth.py paced-late 400
summary "$out/dumps/paced-late" | grep -E "cupti|kernels|busy_share"
echo "-- (e) the same without gpuspy"
timeout 150 $py bench/gpu/truth.py paced-late 400

fi
if want 4; then
echo "== 4. unified memory (CuPy), 20 iterations over 256 MiB"
ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* 2>/dev/null | head -n 2
if ! ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* >/dev/null 2>&1; then
    export GPUSPY_CUPTI_PATH=$($py -c 'import glob, torch, os; print(glob.glob(os.path.dirname(torch.__file__) + "/../nvidia/**/libcupti.so*", recursive=True)[0])')
    echo "GPUSPY_CUPTI_PATH=$GPUSPY_CUPTI_PATH"
fi
GPUSPY_OUT="$out/dumps/managed" LD_PRELOAD="$shim" timeout 150 $py bench/gpu/truth.py managed 20
summary "$out/dumps/managed"
GPUSPY_OUT="$out/dumps/unmanaged" LD_PRELOAD="$shim" timeout 150 $py bench/gpu/truth.py unmanaged 20
summary "$out/dumps/unmanaged"

fi
if want 5; then
echo "== 5. 1e6 launches: peak RSS without and with the shim, dump size"
$py bench/gpu/truth.py launches 1000000 | sed 's/^/without: /'
GPUSPY_OUT="$out/dumps/launches" LD_PRELOAD="$shim" $py bench/gpu/truth.py launches 1000000 | sed 's/^/with:    /'
ls -l "$out"/dumps/launches/gpuspy-*.json | awk '{print "dump bytes", $5}'
summary "$out/dumps/launches"
fi
