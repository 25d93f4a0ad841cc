#!/usr/bin/env python3
"""Checks the GPU side's per-window accounting of gpuspy dumps (schema 2).

For each dump under DIR: observed time; the part of it that is neither busy, transfer nor
idle ("neither": time counted observed by mistake); busy + transfer + idle beyond observed
("excess": records counted busy on time already committed idle); kernels recorded (the
dump's count over its sampling factor) against host launches, beside observed over
covered time (the two should match on a steady loop); and the GPU's idle share of the
time with activity, idle / (busy + transfer + idle), which stays right on dumps written
before the fix. Usage: window_accounting.py DIR...
"""
import glob
import json
import os
import sys


def check(path):
    d = json.load(open(path))
    devices = (d.get("timeline") or {}).get("devices") or []
    if not devices:
        return None
    w = devices[0]
    n = len(w["observed_ns"])
    at = lambda s, i: s[i] if i < len(s) else 0
    idle = [sum(at(s["ns"], i) for s in w["idle_ns"]) for i in range(n)]
    busy = [at(w["busy_ns"], i) for i in range(n)]
    transfer = [at(w.get("transfer_ns", []), i) for i in range(n)]
    accounted = [busy[i] + transfer[i] + idle[i] for i in range(n)]
    observed = w["observed_ns"]
    activity = next(x["activity"] for x in d["gpu"]["devices"] if x.get("activity"))
    sampled = activity.get("sampled") or {}
    factor = sampled.get("factor", 1.0)
    launches = sum(d["timeline"]["host"]["launches"])
    ms = lambda ns: ns / 1e6
    return {
        "observed_ms": round(ms(sum(observed)), 1),
        "neither_ms": round(ms(sum(max(0, observed[i] - accounted[i]) for i in range(n))), 1),
        "excess_ms": round(ms(sum(max(0, accounted[i] - observed[i]) for i in range(n))), 1),
        "recorded_of_launches": round(activity["kernels"] / factor / launches, 3) if launches else None,
        "observed_of_covered": round(sampled["observed_ns"] / sampled["covered_ns"], 3) if sampled else 1.0,
        "idle_share": round(sum(idle) / sum(accounted), 3) if sum(accounted) else None,
        "late_records": activity.get("late_records"),
    }


for root in sys.argv[1:]:
    for path in sorted(glob.glob(os.path.join(root, "**", "gpuspy-*.json"), recursive=True)):
        result = check(path)
        if result:
            print(os.path.relpath(path, root), json.dumps(result))
