#!/usr/bin/env bash
# CPU time of the timeline's work on the writer thread, per tick: one window's snapshot of
# the per-thread counters and one read of the threads' event rings, with 1, 8 and 64
# threads calling all along (shim/src/collect/timeline.rs, test `snapshot_cost`).
# Usage: bench/timeline-snapshot.sh   (from the repository root)
set -euo pipefail
cargo test -q --release -p gpuspy-shim --lib snapshot_cost -- --ignored --nocapture 2>&1 |
    grep -E "threads:"
