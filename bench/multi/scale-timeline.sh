#!/usr/bin/env bash
# gpuspy report over many rank dumps that carry timelines (issue 17: 1,000 ranks under 1 s
# and 64 MiB). A real timeline is recorded first: tests/programs/timed.c under the release
# shim and the fake driver, 300 syncs of 10 ms (3 s: every window of the timeline filled).
# It is grafted onto N copies (default 1000) of an H200 DDP rank dump, each with its own
# rank and pid; then the report's wall time and peak RSS.
#   bash bench/multi/scale-timeline.sh [N]
set -euo pipefail
n=${1:-1000}
bin=$(realpath "${BIN:-target/release}")
dir=$(mktemp -d -t gpuspy-scale.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/driver" "$dir/one" "$dir/ranks"
cp "$bin/libcuda.so" "$dir/driver/libcuda.so.1"
cc -O1 -o "$dir/timed" tests/programs/timed.c -L"$dir/driver" -l:libcuda.so.1
LD_LIBRARY_PATH="$dir/driver" LD_PRELOAD="$bin/libgpuspy.so" GPUSPY_OUT="$dir/one" \
    FAKECUDA_DELAY_NS=cuStreamSynchronize=10000000 "$dir/timed" 300 > /dev/null
python3 - "$dir" "$n" <<'PY'
import glob, json, sys
out, n = sys.argv[1], int(sys.argv[2])
timeline = json.load(open(glob.glob(f"{out}/one/gpuspy-*.json")[0]))["timeline"]
src = json.load(open("tests/data/h200-ddp-slow/gpuspy-r0-vm-755.json"))
src["schema_version"] = 2
src["timeline"] = timeline
print(f"timeline: {len(timeline['host']['calls'])} windows of {timeline['window_ns'] / 1e6:.0f} ms, "
      f"{len(json.dumps(timeline))} bytes of JSON per dump")
for r in range(n):
    src["process"]["pid"] = 10000 + r
    src["process"]["rank"]["rank"] = r
    json.dump(src, open(f"{out}/ranks/gpuspy-r{r}-vm-{10000 + r}.json", "w"))
PY
echo "$n dumps, $(du -sh "$dir/ranks" | cut -f1)"
/usr/bin/time -f "report: %e s wall (%U s user, %S s sys), %M KiB peak RSS" "$bin/gpuspy" report "$dir/ranks" > /dev/null
/usr/bin/time -f "report --json: %e s wall (%U s user, %S s sys), %M KiB peak RSS" "$bin/gpuspy" report --json "$dir/ranks" > /dev/null
