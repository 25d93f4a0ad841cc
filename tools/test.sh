#!/usr/bin/env bash
# The test command: installs what the tests need if missing (`tools/ensure-deps.sh test`:
# a C compiler, xmllint, Chromium, Node.js, promtool, ...), then runs every test. No GPU
# needed. Arguments go to cargo test, e.g. `tools/test.sh ranks::` or
# `tools/test.sh --test timing`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure-deps.sh test
exec cargo test --release "$@"
