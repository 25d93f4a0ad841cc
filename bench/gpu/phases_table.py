"""The table of bench/gpu/phases.sh from one form's dumps, with any gpuspy build, so
recorded runs can be re-diagnosed: python3 bench/gpu/phases_table.py DUMPS [GPUSPY]

For each workload: the first warning-level finding against the intended one, and for each
problem the impact gpuspy predicts (the share of the steady state its fix removes) against
the share of the loop's second half its fix saved (1 - fixed / problem `second_half_s`,
the same steps past warm-up and JIT in both runs), and whether the two meet issue 13's bar:
within 25 % (relative) of the saving or 3 points absolute, whichever is larger.
slow-startup's impact is a share of the wall time; its fix's saving is the CUDA time
saved (`cuda_s`: from the first CUDA call to the loop's end, without the Python imports
before it) over the problem run's wall time.

Also printed: the prediction as a share of the loop (impact x steady-state time / loop
time) against the share of the whole loop saved. Rounds whose workloads printed no
`second_half_s` or `cuda_s` (the oldest recorded ones) are judged on these, and
slow-startup on the share of gpuspy's start-up phase saved. That comparison assumes the
fix saves nothing outside the steady state, which is wrong for a loop of uniform steps (3
steps of a managed-memory loop, 280 ms of 528 ms steady, read 28 % against 63 % saved,
when the steady state's own prediction was 53 %); and the start-up phase holds the
imports."""
import functools
import json
import os
import re
import subprocess
import sys

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
    "torch-compile": ("slow-startup", "torch-compile-eager"),
    # The oldest recorded rounds ran torch-compile under this name, expecting no warning
    # and with no eager run; its compile took 7-11 s with the cache warm, a quarter to a
    # third of the run, which is what slow-startup reports.
    "healthy-compile": ("slow-startup", None),
    "healthy-matmul": (None, None),
    "healthy-graph": (None, None),
    "healthy-pauses": (None, None),
}
# The workloads whose fix shortens the time to the loop's end, not the loop.
STARTUP = {"slow-startup", "torch-compile", "healthy-compile"}


@functools.lru_cache(maxsize=None)
def load(d, gpuspy, mode):
    """The workload's printed times (loop_s, second_half_s, cuda_s) and gpuspy's report
    (once per run: a fix is also a row of its own in some tables)."""
    out = f"{d}/{mode}.out"
    if not os.path.exists(out):
        return None
    times = {k: float(v) for k, v in re.findall(r"^(\w+_s) ([\d.]+)$", open(out).read(), re.M)}
    r = subprocess.run([gpuspy, "report", "--json", f"{d}/{mode}"], capture_output=True, text=True)
    if "loop_s" not in times or r.returncode != 0:
        return None
    return times, json.loads(r.stdout)


def startup_s(report):
    phases = report.get("phases") or []
    return next((p["end_ns"] - p["start_ns"] for p in phases if p["kind"] == "startup"), 0) / 1e9


def meets_bar(predicted, saved, points=0.03):
    """Within 25 % of the saving (relative) or `points` absolute, whichever is larger."""
    # 1e-9: a whole-point difference (0.11 - 0.08) is not 0.03 in floating point.
    return abs(predicted - saved) <= max(0.25 * saved, points) + 1e-9


def saving(before, after):
    return 1 - after / before if before > 0 else None


def pct(x):
    return f"{x:.0%}" if x is not None else "-"


HEADER = ["workload", "intended", "first warning", "all warnings", "predicted impact", "fix saved",
          "predicted (of the loop)", "fix saved (of the loop)", "loop s -> fixed s", "bar"]


def markdown_row(cells):
    return "| " + " | ".join(cells) + " |"


def header(columns):
    return markdown_row(columns) + "\n" + markdown_row(["---"] * len(columns))


def row(d, gpuspy, mode, want, fix, startup=False, points=0.03):
    """One workload's cells (HEADER's columns) and whether its first finding was right
    (None: no run). `startup`: its fix shortens the time to the loop's end, not the loop;
    `points`: the bar's absolute margin (meets_bar)."""
    got = load(d, gpuspy, mode)
    if got is None:
        return [mode, want or "no warning", "(no run)", "", "", "", "", "", "", ""], None
    times, r = got
    loop = times["loop_s"]
    warnings = [f["id"] for f in r["findings"] if f["severity"] == "warning"]
    first = warnings[0] if warnings else None
    ok = "OK" if first == want else "MISS"
    mine = next((f for f in r["findings"] if f["id"] == want), None)
    predicted = f"{mine['impact']:.0%}" if mine else "-"
    steady_s = ((r.get("steady_state") or {}).get("ns") or 0) / 1e9
    # The prediction in the fix's units: a share of the loop (of the start-up for slow-startup).
    in_loop = None
    if mine and startup:
        in_loop = mine["impact"]
    elif mine and loop > 0:
        in_loop = mine["impact"] * steady_s / loop
    saved = saved_loop = None
    change = bar = "-"
    fixed = load(d, gpuspy, fix) if fix else None
    if fixed is not None:
        after = fixed[0]
        if startup:
            # The fix shortens the start-up, not the loop.
            before_s, after_s = startup_s(r), startup_s(fixed[1])
            saved_loop = saving(before_s, after_s)
            if "cuda_s" in times and "cuda_s" in after and mine:
                saved = (times["cuda_s"] - after["cuda_s"]) / (mine["evidence"]["wall_ms"] / 1e3)
            change = f"{before_s:.3f} -> {after_s:.3f}"
        else:
            saved_loop = saving(loop, after["loop_s"])
            if "second_half_s" in times and "second_half_s" in after:
                saved = saving(times["second_half_s"], after["second_half_s"])
            change = f"{loop:.3f} -> {after['loop_s']:.3f}"
        # Rounds without the second half's time are judged as they were recorded.
        judged = (mine["impact"], saved) if saved is not None and mine else (in_loop, saved_loop)
        if judged[1] is not None:
            bar = "met" if judged[0] is not None and meets_bar(*judged, points) else "MISSED"
    cells = [mode, want or "no warning", f"{first or 'no warning'} ({ok})", ", ".join(warnings) or "-",
             predicted, pct(saved), pct(in_loop), pct(saved_loop), change, bar]
    return cells, first == want


def main(d, gpuspy):
    print(header(HEADER))
    for mode, (want, fix) in EXPECTED.items():
        print(markdown_row(row(d, gpuspy, mode, want, fix, mode in STARTUP)[0]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "gpuspy")
