#!/usr/bin/env bash
# Issue 4 on a GPU: each workload of examples/staged.py under gpuspy, its first finding
# against the expected one, and for six problems the predicted impact against the
# speed-up measured when the suggested fix is applied. The last three pairs (input-starved,
# um-fault-heavy, small-grid) need the CUPTI collection and have not run yet.
# Usage on the GPU machine, from the repository root: bash bench/gpu/diagnose.sh OUTDIR
set -uo pipefail
out=${1:?usage: diagnose.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
py=python3
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1
mkdir -p "$out/dumps"
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
for mode in launch-bound sync-stalled sync-fixed pageable-memcpy pageable-fixed alloc-churn alloc-fixed slow-startup healthy-matmul healthy-graph input-starved input-fixed um-fault-heavy um-fixed small-grid small-grid-fixed; do
    env=()
    [ "$mode" = alloc-churn ] && env=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
    env "${env[@]}" "$bin/gpuspy" run --json -o "$out/dumps/$mode" -- $py examples/staged.py "$mode" \
        > "$out/dumps/$mode.out" 2> "$out/dumps/$mode.err"
    echo "$mode: exit $? $(grep loop_s "$out/dumps/$mode.out")"
done
$py - "$out/dumps" <<'PY' | tee "$out/diagnose-table.md"
import json, re, sys
d = sys.argv[1]
def load(mode):
    text = open(f"{d}/{mode}.out").read()
    loop = float(re.search(r"loop_s ([\d.]+)", text).group(1))
    report = json.loads(text.strip().splitlines()[-1])
    return loop, report
expected = {"launch-bound": "launch-bound", "sync-stalled": "sync-stalled",
            "pageable-memcpy": "pageable-memcpy", "alloc-churn": "alloc-churn",
            "slow-startup": "slow-startup", "healthy-matmul": None, "healthy-graph": None,
            "input-starved": "input-starved", "um-fault-heavy": "um-fault-heavy",
            "small-grid": "small-grid"}
fixes = {"sync-stalled": "sync-fixed", "pageable-memcpy": "pageable-fixed", "alloc-churn": "alloc-fixed",
         "input-starved": "input-fixed", "um-fault-heavy": "um-fixed", "small-grid": "small-grid-fixed"}
print("| workload | expected first finding | got | warnings | predicted impact (share of steady time) | measured: time saved by the fix / steady time | measured: loop speed-up |")
print("|---|---|---|---|---|---|---|")
for mode, want in expected.items():
    loop, r = load(mode)
    warnings = [f["id"] for f in r["findings"] if f["severity"] == "warning"]
    first = r["findings"][0] if r["findings"] else None
    got = r["verdict"] or "no warning"
    ok = "OK" if (r["verdict"] == want) else "MISS"
    # The impact the expected rule predicted, whether or not it came first.
    mine = next((f for f in r["findings"] if f["id"] == want), None)
    predicted = f"{mine['impact']:.0%} ({want})" if mine else "-"
    saved = gain = "-"
    if mode in fixes:
        fixed_loop, _ = load(fixes[mode])
        saved = f"{(loop - fixed_loop) / (r['steady_ns'] / 1e9):.0%} ({loop - fixed_loop:.2f} s of {r['steady_ns'] / 1e9:.2f} s)"
        gain = f"{1 - fixed_loop / loop:.0%} ({loop:.2f} s -> {fixed_loop:.2f} s)"
    print(f"| {mode} | {want or 'no warning'} | {got} ({ok}) | {', '.join(warnings) or '-'} | {predicted} | {saved} | {gain} |")
PY
for mode in sync-stalled pageable-memcpy alloc-churn healthy-matmul; do
    echo "== $mode"; "$bin/gpuspy" report "$out/dumps/$mode" | sed -n '/^Verdict/,/^Driver API/p'
done > "$out/diagnose-reports.txt"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
