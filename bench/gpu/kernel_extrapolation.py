"""How well a sampled dump's kernel count estimates the kernels that ran, two ways, against
the host's exact launch count (one kernel per launch outside CUDA graphs and libraries
that launch from inside the driver):

- uniform: the dump's own count, the recorded kernels times covered / observed time (the
  shim's `activity.sampled.factor`);
- by launches: the recorded kernels times all launches over the launches made while the
  kinds were on (each window's launches times its observed share, from the timeline).

    python3 bench/gpu/kernel_extrapolation.py DUMPS_DIR   (searched recursively)
"""
import glob
import json
import sys

print(f"{'dump':52s} {'launches':>9s} {'uniform':>16s} {'by launches':>18s}  factor")
for path in sorted(glob.glob(sys.argv[1] + "/**/*.json", recursive=True)):
    d = json.load(open(path))
    devices = (d.get("gpu") or {}).get("devices") or []
    a = devices[0].get("activity") if devices else None
    t = d.get("timeline")
    if not a or not t or not t.get("devices"):
        continue
    factor = (a.get("sampled") or {}).get("factor", 1.0)
    launches = t["host"]["launches"]
    observed = t["devices"][0]["observed_ns"]
    w = t["window_ns"]
    total = sum(launches)
    seen = sum(n * min(o, w) / w for n, o in zip(launches, observed))
    recorded = a["kernels"] / factor
    by_launches = recorded * total / seen if seen else float("nan")
    name = path[len(sys.argv[1]):].lstrip("/")
    print(f"{name:52s} {total:9d} {a['kernels']:9d} ({a['kernels'] / max(total, 1):.3f}) "
          f"{by_launches:10.0f} ({by_launches / max(total, 1):.3f})  {factor:.2f}")
