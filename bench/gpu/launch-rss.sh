#!/usr/bin/env bash
# The memory bound of issue 13 on a GPU: peak RSS of 10^6 PyTorch kernel launches
# (bench/gpu/truth.py launches) without gpuspy and under `gpuspy run` (the default
# capture), ROUNDS rounds in alternating order, with each dump's size.
# Usage on the GPU machine, from the repository root:
#   BIN=.dev/bin bash bench/gpu/launch-rss.sh OUTDIR [ROUNDS]
set -uo pipefail
out=${1:?usage: launch-rss.sh OUTDIR [ROUNDS]}
rounds=${2:-3}
bin=$(realpath "${BIN:-.dev/bin}")
export GPUSPY_FLUSH_S=0
echo "== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
rss() { # rss [gpuspy run -o DIR --]: the run's max_rss_kib
    "$@" python3 bench/gpu/truth.py launches 1000000 | awk '/^max_rss_kib/ {print $2}'
}
for i in $(seq "$rounds"); do
    d="$out/dumps/$i"
    if [ $((i % 2)) = 1 ]; then
        a=$(rss); b=$(rss "$bin/gpuspy" run -o "$d" --)
    else
        b=$(rss "$bin/gpuspy" run -o "$d" --); a=$(rss)
    fi
    echo "round $i: without $a KiB, with $b KiB, added $(( (b - a) / 1024 )) MiB, dump $(cat "$d"/* | wc -c) bytes"
done
rm -rf "$out/dumps"
