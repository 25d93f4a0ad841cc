"""Issue 19: gpuspy's GPM figures against `nvidia-smi dmon --gpm-metrics 2,3,5,7,10` on the
same loops (bench/gpu/gpm.sh). For each workload, the median over the loop of each
metric: dmon's one-second rows, and the 100 ms slots of the dump's telemetry series.
A row or slot is in the loop when its SM activity is at least half its run's highest.

Usage: python3 bench/gpu/gpm_table.py DUMPS_DIR
"""
import glob
import json
import statistics
import sys

MODES = ["small-grid-4", "small-grid-full", "matmul-bf16", "matmul-fp32", "elementwise-fp32"]
# dmon's GPM columns, in the order asked for, and the dump's series columns.
METRICS = [
    ("SM active", "sm_active_pct"),
    ("occupancy", "sm_occupancy_pct"),
    ("tensor", "tensor_active_pct"),
    ("DRAM bw", "dram_bw_util_pct"),
]
DMON_COLUMNS = {"SM active": 0, "occupancy": 1, "tensor": 2, "DRAM bw": 4}


def in_loop(rows, sm):
    top = max((sm(r) for r in rows), default=0)
    return [r for r in rows if top > 0 and sm(r) >= top / 2]


def dmon_medians(path):
    rows = []
    for line in open(path):
        parts = line.split()
        if line.startswith("#") or len(parts) < 17 or "-" in parts[12:17]:
            continue
        rows.append([float(x) for x in parts[12:17]])
    loop = in_loop(rows, lambda r: r[0])
    return {m: statistics.median(r[DMON_COLUMNS[m]] for r in loop) for m, _ in METRICS} if loop else {}


def dump_medians(run_dir):
    for path in glob.glob(f"{run_dir}/gpuspy-*.json"):
        dump = json.load(open(path))
        for dev in (dump.get("gpu") or {}).get("devices", []):
            series = (dev.get("telemetry") or {}).get("series", {})
            if not series.get("sm_active_pct"):
                continue
            slots = list(range(len(series["sm_active_pct"])))
            loop = in_loop(slots, lambda i: series["sm_active_pct"][i])
            return {m: statistics.median(series[c][i] for i in loop) for m, c in METRICS}
    return {}


def main(dumps):
    print("| workload | metric | nvidia-smi dmon | gpuspy | difference (points) |")
    print("| --- | --- | ---: | ---: | ---: |")
    for mode in MODES:
        dmon, ours = dmon_medians(f"{dumps}/{mode}.dmon"), dump_medians(f"{dumps}/{mode}")
        for metric, _ in METRICS:
            if metric in dmon and metric in ours:
                print(f"| {mode} | {metric} | {dmon[metric]:.0f} | {ours[metric]:.1f} | {ours[metric] - dmon[metric]:+.1f} |")


if __name__ == "__main__":
    main(sys.argv[1])
