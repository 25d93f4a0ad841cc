"""Prints a dump's unified-memory counters per timeline window, beside the host's launches
and blocked time: where the counters were on, and what they saw.
Usage: python3 bench/gpu/um_windows.py DUMP.json"""
import json
import sys

d = json.load(open(sys.argv[1]))
t = d.get("timeline") or {}
um = t.get("unified_memory")
w = t.get("window_ns", 0)
total = (d.get("gpu") or {}).get("unified_memory")
print(f"  whole run (scaled): {total}")
if not um:
    print("  no unified-memory windows")
    sys.exit()
launches = t["host"]["launches"]
first = next((i for i, n in enumerate(launches) if n), None)
print(f"  window {w / 1e6:.0f} ms, first launch in window {first}")
for i, on in enumerate(um["observed_ns"]):
    if on or um["cpu_page_faults"][i] or um["gpu_page_fault_groups"][i]:
        print(f"  w{i:4d} on {on / 1e6:6.1f} ms  launches {launches[i]:4d}  cpu {um['cpu_page_faults'][i]:6d}  gpu groups {um['gpu_page_fault_groups'][i]:6d}  htod {um['bytes_htod'][i] >> 20:6d} MiB  dtoh {um['bytes_dtoh'][i] >> 20:6d} MiB")
