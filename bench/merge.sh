#!/usr/bin/env bash
# How long `gpuspy report` takes to merge 1,000 rank dumps, and its peak memory: an H200
# dump copied as ranks 0-999 (the scale test in tests/ranks.rs does the same), by default
# tests/data/h200-matmul-late-records.json (a 5 s loop with its timeline, 40 KB); set
# DUMP=tests/data/h200-torch-pageable.json for the timeline-less dump of 2026-11-30's
# figure. Prints a summary; the README quotes it from bench/results.
# Usage: [DUMP=path] bench/merge.sh [REPEATS] > bench/results/merge-DATE-MACHINE.txt
#        (from the repository root after cargo build --release)
set -euo pipefail
repeats=${1:-5}
bin=${BIN:-target/release}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dump=${DUMP:-tests/data/h200-matmul-late-records.json}
python3 - "$work" "$dump" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
for r in range(1000):
    d["process"]["pid"] = 10_000 + r
    d["process"]["rank"] = {"rank": r, "source": "RANK", "world_size": 1000}
    json.dump(d, open(f"{sys.argv[1]}/gpuspy-r{r}-node{r // 8}-{10_000 + r}.json", "w"))
PY
echo "# $(date -u +%F) commit $(git rev-parse --short HEAD), $(nproc) cores, $(uname -m), load average $(cut -d' ' -f1 /proc/loadavg)"
echo "gpuspy report --json over 1,000 copies of $dump ($(stat -c %s "$dump") bytes), $repeats runs (wall s, CPU s, peak RSS KiB):"
for i in $(seq "$repeats"); do
    /usr/bin/time -f "%e %U %S %M" "$bin/gpuspy" report --json "$work" 2>&1 >/dev/null \
        | awk '{printf "  %.2f %.2f %d\n", $1, $2 + $3, $4}'
done | tee "$work/runs.txt"
sort -n "$work/runs.txt" | awk '{w[NR] = $1} END {
    printf "median wall time to merge 1,000 dumps: %.2f s\n", w[int((NR + 1) / 2)] }'
sort -n -k2 "$work/runs.txt" | awk '{c[NR] = $2} END {
    printf "median CPU time to merge 1,000 dumps: %.2f s\n", c[int((NR + 1) / 2)] }'
