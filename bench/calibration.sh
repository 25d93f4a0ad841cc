#!/usr/bin/env bash
# Issue 13's calibration: each staged workload's predicted impact against the saving its fix
# measured, re-diagnosed offline by the current gpuspy from recorded rounds of
# bench/gpu/phases.sh (their dumps.tar.gz), with whether each meets the bar (within 25 %
# relative or 3 points absolute of the saving) and whether each workload gets its intended
# first finding (healthy ones: no warning); then per workload and form, the medians over
# the rounds given (bench/gpu/calibration_medians.py).
# Usage: bash bench/calibration.sh RESULT_DIR... (GPUSPY=path/to/gpuspy, default
# target/release/gpuspy)
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: calibration.sh RESULT_DIR..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
gpuspy=$(realpath "${GPUSPY:-$here/../target/release/gpuspy}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for dir in "$@"; do
    [ -f "$dir/dumps.tar.gz" ] || { echo "calibration.sh: no dumps.tar.gz in $dir" >&2; exit 2; }
    to="$work/$(basename "$dir")"
    mkdir -p "$to"
    tar -C "$to" -xzf "$dir/dumps.tar.gz"
    for form in "$to"/dumps/*/; do
        echo "== $(basename "$dir") $(basename "$form")"
        python3 "$here/gpu/phases_table.py" "${form%/}" "$gpuspy"
    done
done | tee "$work/all.md"
met=$(grep -c '| met |$' "$work/all.md" || true)
missed=$(grep -c '| MISSED |$' "$work/all.md" || true)
first_ok=$(grep -c '(OK)' "$work/all.md" || true)
first_miss=$(grep -c '(MISS)' "$work/all.md" || true)
echo "== impact within the bar: $met of $((met + missed)); intended first finding: $first_ok of $((first_ok + first_miss))"
python3 "$here/gpu/calibration_medians.py" < "$work/all.md"
