#!/usr/bin/env bash
# gpuspy report over many rank dumps with GPU sections: N copies (default 1000) of one H200
# DDP rank dump, each with its own rank and pid; wall time and peak RSS of the report.
#   bash bench/multi/scale.sh [N]
set -euo pipefail
n=${1:-1000}
bin=$(realpath "${BIN:-target/release}")
dir=$(mktemp -d -t gpuspy-scale.XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" "$n" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
src = json.load(open("tests/data/h200-ddp-slow/gpuspy-r0-vm-755.json"))
for r in range(n):
    src["process"]["pid"] = 10000 + r
    src["process"]["rank"]["rank"] = r
    json.dump(src, open(f"{out}/gpuspy-r{r}-vm-{10000 + r}.json", "w"))
PY
echo "$n dumps, $(du -sh "$dir" | cut -f1)"
/usr/bin/time -f "report: %e s wall, %M KiB peak RSS" "$bin/gpuspy" report "$dir" > /dev/null
