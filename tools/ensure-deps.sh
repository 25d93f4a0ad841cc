#!/usr/bin/env bash
# Installs what building and testing gpuspy needs on a fresh Debian machine: a C compiler
# (the integration tests and the demo compile small C programs against the fake driver),
# xmllint (the tests validate JUnit output against a schema) and the Rust toolchain's
# rustfmt/clippy components. Safe to run again.
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
    echo "tools/ensure-deps.sh: cargo is not installed; install Rust (https://rustup.rs) first" >&2
    exit 1
fi
missing=()
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
command -v xmllint >/dev/null 2>&1 || missing+=(libxml2-utils)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
