#!/usr/bin/env bash
# Issue 36 on a GPU: every real-library loop of examples/reallib.py (JAX, transformers,
# Lightning, CuPy, DataLoader workers, torchvision augmentation, ...) and its fix, in the
# short form (a loop of about 1-3 s after the imports and set-up) and the long one (5-10 s),
# under gpuspy; then the table of bench/gpu/reallib_table.py per form: the first finding
# against the intended one, each problem's predicted impact against the time its fix
# saves, held-out modes apart. Each run's line says whether CUPTI was on: the CuPy and JAX
# modes load no libcupti themselves, and issue 36 wants it on for them too ("CUPTI-CHECK
# FAILED" otherwise).
# Usage on the GPU machine, from the repository root (.dev/bin holds the release gpuspy
# and libgpuspy.so):
#   BIN=.dev/bin bash bench/gpu/reallib.sh OUTDIR [FORMS] [MODES]
# e.g. BIN=.dev/bin bash bench/gpu/reallib.sh $OUT/r1, or one form per command:
#   BIN=.dev/bin bash bench/gpu/reallib.sh $OUT/r1 short; ... $OUT/r1 long
# Budget on an H200 (estimated, not yet measured): 25 runs a form, each 4-9 s of Python
# imports (torch, JAX, transformers, Lightning) and set-up under gpuspy; loops of about
# 1.5 s (short) or 5 s (long) for a problem and healthy mode, a fraction of that for a
# fix: about 3 min for the short form, 4 min for the long one, 7-8 min in all with the
# tables. Each run is cut at 90 s.
# Writes OUTDIR/reallib-log.txt (these lines), OUTDIR/reallib-table.md and
# OUTDIR/dumps.tar.gz (the dumps and each run's stdout/stderr under dumps/FORM/MODE).
set -uo pipefail
out=${1:?usage: reallib.sh OUTDIR [FORMS] [MODES]}
forms=${2:-short long}
modes=${3:-jax-nojit jax-jit hf-generate hf-generate-fixed lightning-fit lightning-fit-fixed cupy-elementwise cupy-fused loader-slow loader-fast augment-main augment-gpu item-logging item-logging-fixed cupy-asnumpy cupy-on-device numpy-pageable numpy-pinned adam-foreach-off adam-fused jax-numpy-sync jax-on-device healthy-graph-infer healthy-loader healthy-checkpoint}
bin=$(realpath "${BIN:-.dev/bin}")
python=${PYTHON:-python3}
mkdir -p "$out"
export GPUSPY_FLUSH_S=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
{
    echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    # Versions from the package metadata: importing the frameworks here would cost 20 s.
    "$python" -c 'from importlib import metadata
for p in ("torch", "jax", "cupy-cuda13x", "transformers", "lightning", "torchvision"):
    try:
        print(p, metadata.version(p), end="  ")
    except metadata.PackageNotFoundError:
        print(p, "missing", end="  ")
print()'
    round_start=$(date +%s)
    for form in $forms; do
        for mode in $modes; do
            d="$out/dumps/$form/$mode"
            mkdir -p "$d"
            start=$(date +%s%N)
            timeout 90 "$bin/gpuspy" run -o "$d" -- "$python" examples/reallib.py "$mode" --form "$form" \
                > "$d.out" 2> "$d.err"
            rc=$?
            wall=$((($(date +%s%N) - start) / 1000000))
            cupti=$("$bin/gpuspy" report "$d" 2>/dev/null | grep -m1 -oE 'CUPTI: (on|off)')
            check=""
            case $mode in jax-* | cupy-*) [[ $cupti == "CUPTI: on" ]] || check=" CUPTI-CHECK FAILED" ;; esac
            echo "$form $mode: exit $rc wall $wall ms ${cupti:-CUPTI: (no report)}$check $(grep -E '^((loop|second_half|cuda)_s|result) ' "$d.out" | tr '\n' ' ')"
        done
    done
    echo "== runs took $(($(date +%s) - round_start)) s"
} 2>&1 | tee "$out/reallib-log.txt"
for form in $forms; do
    echo "== $form"
    "$python" bench/gpu/reallib_table.py "$out/dumps/$form" "$bin/gpuspy"
done | tee "$out/reallib-table.md"
tar -C "$out" -czf "$out/dumps.tar.gz" dumps && rm -rf "$out/dumps"
ls -la "$out"
