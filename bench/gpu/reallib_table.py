"""The table of bench/gpu/reallib.sh from one form's dumps, with any gpuspy build, so
recorded runs can be re-diagnosed: python3 bench/gpu/reallib_table.py DUMPS [GPUSPY]

The columns of bench/gpu/phases_table.py (its functions make them): for each real-library
loop of examples/reallib.py the first warning-level finding against the intended one, and
for each problem the impact gpuspy predicts against the share of the loop's second half
its fix saved. The bar is issue 36's: within 25 % of the saving (relative) or 5 points.
Two more columns: CUPTI in the problem's and the fix's run (issue 36 wants "on" for CuPy
and JAX, whose processes load no CUPTI themselves), and whether the two runs printed the
same `result` (the fix did the same work: the same tokens, the same sums).

The held-out modes (examples/reallib.py's docstring) are a section of their own, with
their own count: the analysis must not be calibrated on them.
"""
import os
import re
import sys

import phases_table

# mode -> (intended first warning, fix mode). Per-op dispatch overhead is `launch-bound`:
# no other rule of today names it (issue 36 asks for it in the compute layer).
EXPECTED = {
    "jax-nojit": ("launch-bound", "jax-jit"),
    "hf-generate": ("launch-bound", "hf-generate-fixed"),
    "cupy-elementwise": ("launch-bound", "cupy-fused"),
    "loader-slow": ("input-starved", "loader-fast"),
    "item-logging": ("sync-stalled", "item-logging-fixed"),
    "numpy-pageable": ("pageable-memcpy", "numpy-pinned"),
    "lightning-fit": ("input-starved", "lightning-fit-fixed"),
    "healthy-graph-infer": (None, None),
    "healthy-checkpoint": (None, None),
    # Held out.
    "augment-main": ("input-starved", "augment-gpu"),
    "cupy-asnumpy": ("sync-stalled", "cupy-on-device"),
    "adam-foreach-off": ("launch-bound", "adam-fused"),
    "jax-numpy-sync": ("sync-stalled", "jax-on-device"),
    "healthy-loader": (None, None),
}
HELD_OUT = {"augment-main", "cupy-asnumpy", "adam-foreach-off", "jax-numpy-sync", "healthy-loader"}
# The processes that load no libcupti of their own: gpuspy has to find it.
OWN_CUPTI = ("jax-", "cupy-")
# Issue 36's bar: 5 points absolute where 25 % of the saving is less.
POINTS = 0.05


def cupti(d, gpuspy, mode):
    """"on" or "off" for a run's main process (the first with GPU data), "-" without a run."""
    got = phases_table.load(d, gpuspy, mode)
    if got is None:
        return "-"
    rows = got[1].get("gpu") or []
    return "on" if rows and rows[0]["cupti"]["active"] else "off"


def result(d, mode):
    path = f"{d}/{mode}.out"
    if not os.path.exists(path):
        return None
    return re.findall(r"^result .*$", open(path).read(), re.M) or None


def same_result(d, mode, fix):
    if fix is None:
        return "-"
    mine, theirs = result(d, mode), result(d, fix)
    if mine is None or theirs is None:
        return "-"
    return "same" if mine == theirs else "DIFFERENT"


def section(d, gpuspy, title, modes):
    print(f"### {title}\n")
    print(phases_table.header(phases_table.HEADER + ["CUPTI (problem / fix)", "same result"]))
    runs = right = judged = met = 0
    for mode in modes:
        want, fix = EXPECTED[mode]
        cells, ok = phases_table.row(d, gpuspy, mode, want, fix, points=POINTS)
        states = [cupti(d, gpuspy, mode)] + ([cupti(d, gpuspy, fix)] if fix else [])
        if mode.startswith(OWN_CUPTI) and any(s == "off" for s in states):
            states.append("(wanted on)")
        print(phases_table.markdown_row(cells + [" / ".join(states), same_result(d, mode, fix)]))
        if ok is not None:
            runs += 1
            right += ok
        bar = cells[-1]
        if bar in ("met", "MISSED"):
            judged += 1
            met += bar == "met"
    print(f"\nfirst finding right: {right} of {runs} runs; impact bar met: {met} of {judged}\n")


def main(d, gpuspy):
    section(d, gpuspy, "Calibration modes", [m for m in EXPECTED if m not in HELD_OUT])
    section(d, gpuspy, "Held-out modes (not for calibration)", [m for m in EXPECTED if m in HELD_OUT])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "gpuspy")
