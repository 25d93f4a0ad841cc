"""Python call sites on the H200 (issue 16). Modes:
  item N       N steps of a GPU step (matmuls) read back with .item(): a sync per step
  pageable N   N copies of a pageable 64 MiB host tensor with h.to('cuda')
  launch N     the launch-bound elementwise loop; prints "loop_ns_per_iter X"
  check MODE DUMPDIR   verifies that the dump names MODE's marked line (PASS/FAIL lines)
The lines to be named carry a "# site:" marker; check finds them in this file."""
import glob
import json
import sys
import time


def item(n):
    import torch
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    total = 0.0
    for _ in range(n):
        b = a @ a
        b = b @ a
        total += b.float().abs().mean().item()  # site: item
    print(f"result item {total:.6e}")


def pageable(n):
    import torch
    h = torch.randn(16 << 20)
    acc = torch.zeros(16 << 20, device="cuda")
    for _ in range(n):
        acc += h.to("cuda")  # site: pageable
    torch.cuda.synchronize()
    print(f"result pageable {acc.sum().item():.6e}")


def launch(n):
    import torch
    x = torch.ones(1024, device="cuda")
    for _ in range(1000):
        x = x * 1.0001 + 0.1
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(n):
            x = x * 1.0001 + 0.1
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter_ns() - start) / n)
    print(f"loop_ns_per_iter {best:.1f}")


def marked_line(mode):
    with open(__file__) as f:
        for number, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# site: {mode}"):
                return number
    raise SystemExit(f"no marker for {mode}")


def user_frame(frames):
    def library(f):
        path = f["file"]
        return ("/site-packages/" in path or "/dist-packages/" in path
                or path.startswith("<") or "/lib/python3" in path)
    return next((f for f in frames if not library(f)), frames[0] if frames else None)


def check(mode, dumps):
    line = marked_line(mode)
    ok = True
    for path in glob.glob(f"{dumps}/gpuspy-*.json"):
        c = json.load(open(path)).get("call_sites")
        if not c:
            continue
        print(f"  {path}: Python {c['python']}, {c['captures']} captures, "
              f"{c['capture_ns'] / max(c['captures'], 1):.0f} ns per capture, "
              f"{c['native_calls']} native calls, notes {c.get('notes', [])}")
        sites = sorted(c["sites"], key=lambda s: -s["blocked_ns"])
        for s in sites[:5]:
            f = user_frame(s["frames"])
            print(f"    {s['api']:<24} {str(s['cause']):<20} {s['calls']:>6} calls "
                  f"{s['blocked_ns'] / 1e6:9.1f} ms at {f['file']}:{f['line']} in {f['function']}()")
        top = user_frame(sites[0]["frames"]) if sites else None
        ok = bool(top) and top["file"].endswith("callsites.py") and top["line"] == line
    print(f"{'PASS' if ok else 'FAIL'} {mode}: the costliest site is callsites.py:{line}")


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        {"item": item, "pageable": pageable, "launch": launch}[sys.argv[1]](int(sys.argv[2]))
