#!/usr/bin/env bash
# The shim's hardening on a real GPU with PyTorch (issue 11), with the release build in
# $BIN (default .dev/bin):  bash bench/gpu/hardening.sh OUTDIR
# 1. SIGTERM to a PyTorch loop: it dies of SIGTERM and its dump holds the launches up to
#    the signal (ended_by signal 15); SIGINT: Python's KeyboardInterrupt, then a normal dump.
#    (Run 1, 2026-11-30, started the jobs with `&` alone: SIGINT was ignored, as in any
#    background job of a script, and the script waited until the device's time-out.)
# 2. `gpuspy run` killed with SIGTERM: the job gets the signal, gpuspy reports and exits 143.
# 3. os.execv: two dumps, the second named -exec1; the report counts both images.
# 4. 2,000 threads one after another: the same launch count as one thread doing the same
#    work, and no unrecorded calls.
set -uo pipefail
out=${1:?usage: hardening.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
shim="$bin/libgpuspy.so"
py=python3
export PYTHONUNBUFFERED=1 GPUSPY_FLUSH_S=0
mkdir -p "$out"
echo "== date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$py -c 'import torch, platform; print("python", platform.python_version(), "torch", torch.__version__)'

# A background job of a non-interactive shell starts with SIGINT ignored (and Python then
# keeps ignoring it): start each job with the signals at their defaults, as from a terminal.
defaults="env --default-signal=INT,TERM,HUP"
bounded_wait() { # bounded_wait PID: its exit status, or SIGKILL after 120 s
    for _ in $(seq 1200); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$1" 2>/dev/null && { echo "(still running after 120 s: killed)"; kill -9 "$1"; }
    wait "$1"
}

field() { # field DUMPDIR PYEXPR: evaluates PYEXPR with d = the one dump in DUMPDIR
    $py - "$1" "$2" <<'PY'
import glob, json, sys
ds = [json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/gpuspy-*.json"))]
d = ds[0] if len(ds) == 1 else None
launches = lambda d: sum(a["calls"] for a in d["apis"] if a["symbol"].startswith("cuLaunchKernel"))
print(eval(sys.argv[2]))
PY
}

echo "== 1. fatal signals"
for sig in TERM INT; do
    dir="$out/signal-$sig"
    GPUSPY_OUT="$dir" LD_PRELOAD="$shim" $defaults $py bench/gpu/hardening.py signal > "$dir.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do grep -q ready "$dir.log" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    kill -s "$sig" "$pid"
    bounded_wait "$pid"; rc=$?
    echo "SIG$sig: exit status $rc; dumps $(ls "$dir" | wc -l); launches $(field "$dir" 'launches(d)'); complete $(field "$dir" 'd["complete"]'); ended_by $(field "$dir" 'd.get("ended_by")')"
done

echo "== 2. gpuspy run, then SIGTERM to gpuspy"
dir="$out/run-term"
$defaults "$bin/gpuspy" run -o "$dir" -- $py bench/gpu/hardening.py signal > "$dir.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q ready "$dir.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
kill -TERM "$pid"
bounded_wait "$pid"; rc=$?
echo "gpuspy exit status $rc; dumps $(ls "$dir" | wc -l); job ended_by $(field "$dir" 'd.get("ended_by")')"
grep -m 3 -E "^(gpuspy:|Verdict|verdict)" "$dir.log" || head -n 5 "$dir.log"

echo "== 3. exec"
dir="$out/exec"
GPUSPY_OUT="$dir" LD_PRELOAD="$shim" $py bench/gpu/hardening.py exec 2>&1 | grep result
ls "$dir"
echo "per image (name, image, ended_by, launches): $(field "$dir" '[(x["process"].get("image", 0), x.get("ended_by"), launches(x)) for x in ds]')"
"$bin/gpuspy" report --json "$dir" > "$dir.report.json" && $py -c "import json,sys; r=json.load(open(sys.argv[1])); print('report: processes', len(r['processes']), 'cuLaunchKernel', sum(a['count'] for a in r['apis'] if a['api']=='cuLaunchKernel'))" "$dir.report.json"

echo "== 4. 2,000 threads in sequence against one thread"
for mode in threads one-thread; do
    dir="$out/$mode"
    GPUSPY_OUT="$dir" LD_PRELOAD="$shim" $py bench/gpu/hardening.py "$mode" 2000 2>&1 | grep result
    echo "$mode: launches $(field "$dir" 'launches(d)'); threads $(field "$dir" 'd["threads"]'); unrecorded $(field "$dir" 'd["unrecorded_calls"]')"
done
tar -C "$out" -czf "$out/dumps.tar.gz" --exclude='*.tar.gz' . 2>/dev/null
