"""The table of bench/gpu/phases.sh from one form's dumps, with any gpuspy build, so
recorded runs can be re-diagnosed: python3 bench/gpu/phases_table.py DUMPS [GPUSPY]

For each workload: the first warning-level finding against the intended one, and for each
problem the impact gpuspy predicts (the share of the steady state its fix removes), that
prediction as a share of the loop (impact x steady-state time / loop time: the loop also
holds its first steps and the window edges around the steady state, 25 % of a short
loop), against the share of the loop its fix saved (1 - fixed loop time / loop time), and
whether the two shares of the loop meet issue 13's bar: within 25 % (relative) of the
saving or 3 points absolute, whichever is larger. Before 2026-11-30's session 7 the bar
compared the impact itself, a share of the steady state, with the share of the loop.
slow-startup compares its impact with the share of the start-up its fix saved."""
import json
import os
import re
import subprocess
import sys

d = sys.argv[1]
gpuspy = sys.argv[2] if len(sys.argv) > 2 else "gpuspy"
EXPECTED = {
    "launch-bound": ("launch-bound", "launch-fixed"),
    "sync-stalled": ("sync-stalled", "sync-fixed"),
    "sync-host": ("sync-stalled", "sync-host-fixed"),
    "pageable-memcpy": ("pageable-memcpy", "pageable-fixed"),
    "alloc-churn": ("alloc-churn", "alloc-fixed"),
    "input-starved": ("input-starved", "input-fixed"),
    "um-fault-heavy": ("um-fault-heavy", "um-fixed"),
    "triton-small-grid": ("small-grid", "triton-grid-fixed"),
    "slow-startup": ("slow-startup", "slow-startup-fixed"),
    "healthy-matmul": (None, None),
    "healthy-graph": (None, None),
    "healthy-pauses": (None, None),
    "healthy-compile": (None, None),
}


def load(mode):
    out = f"{d}/{mode}.out"
    if not os.path.exists(out):
        return None
    m = re.search(r"loop_s ([\d.]+)", open(out).read())
    r = subprocess.run([gpuspy, "report", "--json", f"{d}/{mode}"], capture_output=True, text=True)
    if not m or r.returncode != 0:
        return None
    return float(m.group(1)), json.loads(r.stdout)


def startup_s(report):
    phases = report.get("phases") or []
    return next((p["end_ns"] - p["start_ns"] for p in phases if p["kind"] == "startup"), 0) / 1e9


def meets_bar(predicted, saved):
    return abs(predicted - saved) <= max(0.25 * saved, 0.03)


print("| workload | intended | first warning | all warnings | predicted impact | predicted (of the loop) | fix saved (of the loop) | loop s -> fixed s | bar |")
print("|---|---|---|---|---|---|---|---|---|")
for mode, (want, fix) in EXPECTED.items():
    got = load(mode)
    if got is None:
        print(f"| {mode} | {want or 'no warning'} | (no run) | | | | | | |")
        continue
    loop, r = got
    warnings = [f["id"] for f in r["findings"] if f["severity"] == "warning"]
    first = warnings[0] if warnings else None
    ok = "OK" if first == want else "MISS"
    mine = next((f for f in r["findings"] if f["id"] == want), None)
    predicted = f"{mine['impact']:.0%}" if mine else "-"
    steady_s = ((r.get("steady_state") or {}).get("ns") or 0) / 1e9
    # The prediction in the fix's units: a share of the loop (of the start-up for slow-startup).
    in_loop = None
    if mine and mode == "slow-startup":
        in_loop = mine["impact"]
    elif mine and loop > 0:
        in_loop = mine["impact"] * steady_s / loop
    predicted_loop = f"{in_loop:.0%}" if in_loop is not None else "-"
    saved = change = bar = "-"
    fixed = load(fix) if fix else None
    if fixed is not None:
        if mode == "slow-startup":
            # The fix shortens the start-up, not the loop.
            before, after = startup_s(r), startup_s(fixed[1])
        else:
            before, after = loop, fixed[0]
        if before > 0:
            saved = f"{1 - after / before:.0%}"
            bar = "met" if in_loop is not None and meets_bar(in_loop, 1 - after / before) else "MISSED"
        change = f"{before:.3f} -> {after:.3f}"
    print(f"| {mode} | {want or 'no warning'} | {first or 'no warning'} ({ok}) | {', '.join(warnings) or '-'} | {predicted} | {predicted_loop} | {saved} | {change} | {bar} |")
