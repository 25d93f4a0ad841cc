#!/usr/bin/env bash
# Issue 17 on two GPUs: bench/gpu/hang-ddp.py under torchrun and gpuspy, rank 1 sleeping
# HANG_S_SLEEP (30) s inside step 20, with GPUSPY_HANG_S=5 and 2 s flushes. While the job
# hangs, the dumps and the Prometheus files are copied (the job then finishes, and its
# final dumps no longer hold the hang): the report on that copy must name rank 0's hung
# call and rank 1 as the rank that never entered the all-reduce; each .prom file is checked
# with promtool where the machine has it. From the repository root on a machine with two
# GPUs, with the release gpuspy and libgpuspy.so in $BIN (.dev/bin):
#   bash bench/gpu/hang-ddp.sh OUTDIR
set -uo pipefail
out=${1:?usage: hang-ddp.sh OUTDIR}
bin=$(realpath "${BIN:-.dev/bin}")
sleep_s=${HANG_S_SLEEP:-30}
# NVLink multicast stays off (the lent machines require it; children inherit these).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GPUSPY_HANG_S=5 GPUSPY_FLUSH_S=2 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
mkdir -p "$out/dumps" "$out/prom" "$out/while-hung/prom"
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c)"
"$bin/gpuspy" run --prom "$out/prom" -o "$out/dumps" -- \
    timeout 300 torchrun --standalone --nproc-per-node 2 bench/gpu/hang-ddp.py --hang-s "$sleep_s" \
    > "$out/job.log" 2>&1 &
job=$!
# The watchdog's stderr line, then one more flush so that rank 1's count is fresh.
for _ in $(seq 240); do
    grep -q "gpuspy: hang:" "$out/job.log" && break
    sleep 0.5
done
grep "gpuspy: hang:" "$out/job.log" || echo "no hang line after 120 s"
sleep 3
cp "$out"/dumps/gpuspy-*.json "$out/while-hung/"
cp "$out"/prom/*.prom "$out/while-hung/prom/" 2>/dev/null
ls -l "$out/while-hung" "$out/while-hung/prom"
wait "$job"; echo "job exit $?"
grep -E "^rank|^gpuspy" "$out/job.log"
"$bin/gpuspy" report "$out/while-hung" > "$out/while-hung.report.txt" 2>&1
"$bin/gpuspy" report --json "$out/while-hung" > "$out/while-hung.report.json" 2>&1
sed -n '/^HANG/,/^$/p' "$out/while-hung.report.txt"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("hangs", r["hangs"]); print("hang_waits", r["hang_waits"])' "$out/while-hung.report.json"
if command -v promtool >/dev/null 2>&1; then
    for f in "$out"/while-hung/prom/*.prom; do
        echo "promtool $f: $(promtool check metrics < "$f" 2>&1 && echo ok)"
    done
else
    echo "promtool is not on this machine: the .prom files were not checked here (tests/fleet.rs checks the format)"
fi
echo "prom files left after the job (expected none): $(ls "$out/prom")"
# The device returns 8 files at most: the dumps and metrics travel as one archive.
tar czf "$out/files.tgz" -C "$out" dumps prom while-hung && rm -rf "$out/dumps" "$out/prom" "$out/while-hung"
