"""The table of bench/gpu/diagnose.sh from its dumps, with any gpuspy build, so recorded
runs can be re-diagnosed: python3 bench/gpu/diagnose_table.py DUMPS [GPUSPY]"""
import json, re, subprocess, sys
d = sys.argv[1]
gpuspy = sys.argv[2] if len(sys.argv) > 2 else "gpuspy"
def load(mode):
    loop = float(re.search(r"loop_s ([\d.]+)", open(f"{d}/{mode}.out").read()).group(1))
    report = json.loads(subprocess.run([gpuspy, "report", "--json", f"{d}/{mode}"],
                                       capture_output=True, text=True, check=True).stdout)
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
