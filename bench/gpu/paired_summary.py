"""Paired overhead summary: reads lines `WORKLOAD CONFIG ROUND VALUE [KERNELS FACTOR LAUNCHED [OWN_CPU_MS [STALLS STALL_MS MAX_MS [EXCESS_PCT]]]]`
(VALUE: the loop's own time, lower is better; `fail` when the run failed) and prints, per
workload and configuration, the median value, the median of the paired relative
differences against the `none` configuration of the same round, and a distribution-free
90 % confidence interval of that median (sign-test bounds: order statistics of the paired
differences). With the loop's excess (its time above its median iteration, in %, measured
within each process), also the paired difference of the excess: what rare events (CUPTI's
switches and recorded slots) cost, with far less noise than the loop times. Used by
overhead-modes.sh and overhead-ddp.sh.

    python3 bench/gpu/paired_summary.py RAW.txt
"""
import collections
import statistics
import sys

from signtest import sign_test_ci

runs = collections.defaultdict(dict)
kernels = collections.defaultdict(list)
own_cpu = collections.defaultdict(list)
stall_ms = collections.defaultdict(list)
excess = collections.defaultdict(dict)
configs = []
for line in open(sys.argv[1]):
    fields = line.split()
    if len(fields) < 4 or fields[0].startswith("#"):
        continue
    w, c, r, value = fields[:4]
    if c not in configs:
        configs.append(c)
    if value != "fail":
        runs[w, r][c] = float(value)
    if len(fields) >= 7 and fields[4] != "-":
        kernels[w, c].append((int(fields[4]) / max(int(fields[6]), 1), float(fields[5])))
    # "-": a figure this script's caller does not measure.
    if len(fields) >= 8 and c != "none" and fields[7] != "-":
        own_cpu[w, c].append(float(fields[7]))
    if len(fields) >= 11 and value != "fail" and fields[9] != "-":
        stall_ms[w, c].append(float(fields[9]))
    if len(fields) >= 12 and value != "fail" and fields[11] != "-":
        excess[w, r][c] = float(fields[11])


print("workload config   median value   paired diff vs none: median [90% CI]   n   kernels in dump / launched, factor, gpuspy threads' CPU ms, loop stall ms (medians)")
for w in dict.fromkeys(w for w, _ in runs):
    rounds = [v for (ww, _), v in runs.items() if ww == w]
    for c in ["none"] + [c for c in configs if c != "none"]:
        values = [v[c] for v in rounds if c in v]
        if not values:
            continue
        d = [100 * (v[c] / v["none"] - 1) for v in rounds if c in v and "none" in v]
        k = kernels.get((w, c), [])
        ks = f"{statistics.median(x for x, _ in k):.4f} {statistics.median(f for _, f in k):.2f}" if k else "- -"
        ks += f" {statistics.median(own_cpu[w, c]):.1f}" if own_cpu.get((w, c)) else ""
        stalls = f"   stalls {statistics.median(stall_ms[w, c]):.1f} ms" if stall_ms.get((w, c)) else ""
        if c == "none" or not d:
            print(f"{w:8} {c:8} {statistics.median(values):14.1f}{stalls}")
            continue
        lo, hi = sign_test_ci(d)
        x = [e[c] - e["none"] for (ww, _), e in excess.items() if ww == w and c in e and "none" in e]
        if x:
            xlo, xhi = sign_test_ci(x)
            stalls += f"   excess vs none {statistics.median(x):+.2f} points [{xlo:+.2f}, {xhi:+.2f}]"
        print(f"{w:8} {c:8} {statistics.median(values):14.1f}   {statistics.median(d):+6.2f}% [{lo:+.2f}, {hi:+.2f}]  {len(d):3}   {ks}{stalls}")
