#!/usr/bin/env bash
# The main job: build gpuspy, then profile a workload with it.
#   - With a working NVIDIA GPU and PyTorch: a real PyTorch training-style loop.
#   - Otherwise: `gpuspy demo`, a simulated training step against the fake driver, CUPTI and
#     NVML (tools/fake*), clearly labelled SIMULATED. Nothing here touches a GPU in that case.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what this job needs (cargo, and the C compiler rustc links with); the tests' tools
# come with tools/test.sh.
tools/ensure-deps.sh
# cargo's own progress (one line per crate, on stderr) shows the build is moving; the first
# one compiles every dependency, which takes minutes on a small machine.
echo "== gpuspy: building with cargo build --release (the first build takes a few minutes on 2 cores)"
cargo build --release
echo
bin=target/release
out=$(mktemp -d -t gpuspy-main.XXXXXX)

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 \
    && python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    echo "== gpuspy: profiling a real PyTorch job on $(nvidia-smi -L | head -n 1)"
    exec "$bin/gpuspy" run -o "$out" -- python3 examples/torch_step.py
fi

echo "== gpuspy: no GPU here. SIMULATED run: gpuspy demo, a training loop against the fake"
echo "== CUDA driver, CUPTI and NVML (tools/fake*; latencies are injected, not measured on a GPU)"
exec "$bin/gpuspy" demo -o "$out"
