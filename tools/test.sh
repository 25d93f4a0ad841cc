#!/usr/bin/env bash
# The test command: installs what the tests need if missing (a C compiler and xmllint,
# tools/ensure-deps.sh), then runs every test. No GPU needed. Arguments go to cargo test,
# e.g. `tools/test.sh ranks::` or `tools/test.sh --test timing`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure-deps.sh
exec cargo test --release "$@"
