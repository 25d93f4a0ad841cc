#!/usr/bin/env bash
# GPU-side truth (CUPTI activity, NVML telemetry) checked on a real GPU. From the repository
# root on the GPU machine, with the release gpuspy and libgpuspy.so in $BIN (.dev/bin):
#   bash bench/gpu/truth.sh OUTDIR
# 1. NVML facts in the dump against `nvidia-smi -q`.
# 2. The elementwise loop under gpuspy: kernel records against cuLaunchKernel calls.
# 3. A mixed loop run inside torch.profiler with gpuspy present: torch's kernel count and
#    busy share (union of kernel intervals over the activity span) against gpuspy's.
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
echo "== date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
$py -c 'import torch, cupy; print("torch", torch.__version__, "cuda", torch.version.cuda, "cupy", cupy.__version__)'

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
print("dropped", g.get("dropped_records"), "refused", g.get("refused_buffers"))
PY
}

echo "== 1. nvidia-smi -q (the facts NVML should give)"
nvidia-smi -q | grep -E "Driver Version|CUDA Version|Product Name|VBIOS|Persistence Mode|PCIe Generation|Max +:|Current +:|Link Width|Ecc Mode|Current +: +(Enabled|Disabled)|Current Power Limit|Enforced Power Limit|MIG Mode" | head -40 | tee "$out/nvidia-smi-q.txt"

echo "== 2. elementwise loop, 20000 iterations, under gpuspy"
GPUSPY_OUT="$out/dumps/elementwise" LD_PRELOAD="$shim" $py bench/gpu/truth.py elementwise 20000
summary "$out/dumps/elementwise"
"$bin/gpuspy" report "$out/dumps/elementwise" > "$out/report-elementwise.txt" 2>&1; echo "report rc $?"

echo "== 3. mixed loop inside torch.profiler, gpuspy present"
GPUSPY_OUT="$out/dumps/tee" LD_PRELOAD="$shim" $py bench/gpu/truth.py tee 3000
summary "$out/dumps/tee"
echo "-- the same without gpuspy (torch.profiler alone)"
$py bench/gpu/truth.py tee 3000

echo "== 4. unified memory (CuPy), 20 iterations over 256 MiB"
GPUSPY_OUT="$out/dumps/managed" LD_PRELOAD="$shim" $py bench/gpu/truth.py managed 20
summary "$out/dumps/managed"
GPUSPY_OUT="$out/dumps/unmanaged" LD_PRELOAD="$shim" $py bench/gpu/truth.py unmanaged 20
summary "$out/dumps/unmanaged"

echo "== 5. 1e6 launches: peak RSS without and with the shim, dump size"
$py bench/gpu/truth.py launches 1000000 | sed 's/^/without: /'
GPUSPY_OUT="$out/dumps/launches" LD_PRELOAD="$shim" $py bench/gpu/truth.py launches 1000000 | sed 's/^/with:    /'
ls -l "$out"/dumps/launches/gpuspy-*.json | awk '{print "dump bytes", $5}'
summary "$out/dumps/launches"
