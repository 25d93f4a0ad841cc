#!/usr/bin/env bash
# The foundation's checks on a real GPU. Run on the GPU machine from the repository root,
# with the release build of gpuspy and libgpuspy.so in $BIN (default .dev/bin):
#   bash bench/gpu/run.sh OUTDIR
# 1. Driver facts and the coverage of the hook list against the driver's real exports.
# 2. Each workload (PyTorch elementwise, .item(), pageable and pinned copies, bf16 matmul,
#    CuPy, Triton, JAX) with and without the shim: identical result lines, exit 0.
# 3. Launch counts against torch.profiler: two runs of the profiled elementwise loop
#    (1,000 and 21,000 iterations); the difference in cuLaunchKernel+cuLaunchKernelEx must
#    equal the difference in CUDA kernel events.
# 4. examples/torch_step.py under `gpuspy run` (what tools/main.sh runs on a GPU machine).
# The overhead measurement is bench/gpu/overhead.sh. The recorded runs 1-3 in bench/results
# ran the same measurement inline, as section 4 of an earlier version of this script.
set -uo pipefail
out=${1:?usage: run.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
shim="$bin/libgpuspy.so"
mkdir -p "$out/dumps"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 GPUSPY_FLUSH_S=0
py=python3

echo "== date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
$py -c 'import torch, cupy, triton, jax, platform; print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda, "cupy", cupy.__version__, "triton", triton.__version__, "jax", jax.__version__)'
ldd --version | head -n 1
libcuda=$($py -c 'import ctypes, ctypes.util; print(ctypes.util.find_library("cuda") or "")')
libcuda_path=$(ldconfig -p | awk '/libcuda.so.1 / {print $NF; exit}')
echo "libcuda: ${libcuda_path:-$libcuda}"

echo "== 1. hook coverage against the driver's exports"
$py - "$libcuda_path" <<'PY' | tee "$out/coverage.txt"
import re, subprocess, sys
exports = set()
try:
    text = subprocess.run(["nm", "-D", "--defined-only", sys.argv[1]], capture_output=True, text=True).stdout
    exports = {l.split()[-1] for l in text.splitlines() if re.search(r" T cu[A-Z]", l)}
except FileNotFoundError:
    pass
if not exports:  # no binutils: read the dynamic symbol table with ctypes probing instead
    import ctypes
    lib = ctypes.CDLL(sys.argv[1])
    names = open("shim/src/hot/hooks.rs").read()
    exports = {n for n in re.findall(r"^\s+(cu\w+)(?:\(| =>)", names, re.M) if hasattr(lib, n)}
    print("(nm missing: probed only the hook list)")
hooks = set(re.findall(r"^\s+(cu\w+)(?:\(| =>)", open("shim/src/hot/hooks.rs").read(), re.M))
print(f"driver exports {len(exports)} cu* functions; gpuspy wraps {len(hooks)} names")
print("wrapped and exported:", len(hooks & exports))
print("wrapped but not exported by this driver:", " ".join(sorted(hooks - exports)) or "none")
fams = ("cuLaunch", "cuMemcpy", "cuMemset", "cuMemAlloc", "cuMemFree", "cuMemHost", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemPrefetch", "cuMemAdvise", "cuGraphLaunch", "cuStreamBeginCapture", "cuStreamEndCapture")
missing = sorted(e for e in exports - hooks if e.startswith(fams))
print("exported in wrapped families but not wrapped:", " ".join(missing) or "none")
PY

run_pair() { # run_pair MODE [N]: without, then with the shim; compare result lines
    local mode=$1; shift
    local plain shimmed
    plain=$($py bench/gpu/workloads.py "$mode" "$@" 2>&1); local rc1=$?
    shimmed=$(GPUSPY_OUT="$out/dumps/$mode" LD_PRELOAD="$shim" $py bench/gpu/workloads.py "$mode" "$@" 2>&1); local rc2=$?
    local r1 r2
    r1=$(grep '^result' <<<"$plain"); r2=$(grep '^result' <<<"$shimmed")
    if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ -n "$r1" ] && [ "$r1" = "$r2" ]; then
        echo "SAME  $mode: $r1 (exit $rc1/$rc2)"
    else
        echo "DIFF  $mode: without [$r1] exit $rc1 | with [$r2] exit $rc2"
        tail -n 5 <<<"$shimmed"
    fi
    "$bin/gpuspy" report --json "$out/dumps/$mode" > "$out/dumps/$mode.report.json" 2>&1
    $py - "$out/dumps/$mode.report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
top = ", ".join(f"{a['api']} {a['count']}" for a in sorted(r["apis"], key=lambda a: -a["count"])[:6])
print(f"      calls: {top}")
syncs = ", ".join(f"{s['cause']} {s['count']}" for s in r["syncs"])
copies = ", ".join(f"{c['direction']}/{c['host']} {c['count']}x {c['bytes']}B" for c in r["copies"])
print(f"      syncs: {syncs or '-'}; copies: {copies or '-'}; unwrapped lookups: {len(r['unwrapped_symbols'])}")
PY
}

echo "== 2. workloads with and without the shim"
for mode in torch-elementwise torch-item torch-pageable torch-pinned torch-matmul cupy triton jax; do
    run_pair "$mode"
done
"$bin/gpuspy" report "$out/dumps/torch-item" > "$out/torch-item.report.txt" 2>&1

echo "== 3. launches against torch.profiler kernel events"
for n in 1000 21000; do
    GPUSPY_OUT="$out/dumps/profiled-$n" LD_PRELOAD="$shim" $py bench/gpu/workloads.py torch-profiled $n > "$out/profiled-$n.txt" 2>&1
    "$bin/gpuspy" report --json "$out/dumps/profiled-$n" > "$out/dumps/profiled-$n.report.json"
done
$py - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
def launches(n):
    r = json.load(open(f"{out}/dumps/profiled-{n}.report.json"))
    return sum(a["count"] for a in r["apis"] if a["api"] in ("cuLaunchKernel", "cuLaunchKernelEx"))
def kernels(n):
    return int(re.search(r"profiler-kernels (\d+)", open(f"{out}/profiled-{n}.txt").read()).group(1))
dl, dk = launches(21000) - launches(1000), kernels(21000) - kernels(1000)
print(f"21000 iterations: launches {launches(21000)} (whole process), profiler kernels {kernels(21000)} (profiled loop)")
print(f"1000 iterations:  launches {launches(1000)}, profiler kernels {kernels(1000)}")
print(f"difference: launches {dl}, profiler kernels {dk} -> {'EQUAL' if dl == dk else 'NOT EQUAL'}")
PY

echo "== 4. examples/torch_step.py under gpuspy run"
"$bin/gpuspy" run -o "$out/dumps/example" -- $py examples/torch_step.py > "$out/torch-step.report.txt" 2>&1
echo "exit $?"; head -n 12 "$out/torch-step.report.txt"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
