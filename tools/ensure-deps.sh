#!/usr/bin/env bash
# Installs what gpuspy needs on a fresh Debian machine, through apt when missing.
#
#   tools/ensure-deps.sh        the main job (tools/main.sh): cargo must be there, and a C
#                               compiler (rustc links through it, and the shim's build
#                               compiles shim/src/hot/exec_variadic.c).
#   tools/ensure-deps.sh test   the tests, CI and the wheel check, on top of that: xmllint
#                               (JUnit output is validated against a schema), objdump (a test
#                               reads the shim's glibc symbol versions), Python with venv
#                               (tools/wheel-check.sh builds and installs the pip wheel),
#                               Chromium, Node.js and tools/browser's npm packages
#                               (tests/views.rs loads the HTML reports in headless Chromium
#                               through puppeteer-core, which downloads no browser), promtool
#                               (the tests check the Prometheus textfiles with it) and the Rust
#                               toolchain's rustfmt/clippy components.
#
# Safe to run again: it does nothing (no apt-get, no npm, no network) and prints nothing
# when everything is there.
set -euo pipefail
set_name=${1:-main}
case "$set_name" in
    main | test) ;;
    *)
        echo "tools/ensure-deps.sh: unknown set '$set_name' (use no argument for the main job, or 'test')" >&2
        exit 2
        ;;
esac
if ! command -v cargo >/dev/null 2>&1; then
    echo "tools/ensure-deps.sh: cargo is not installed; install Rust (https://rustup.rs) first" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
if [ "$set_name" = test ]; then
    command -v xmllint >/dev/null 2>&1 || missing+=(libxml2-utils)
    command -v objdump >/dev/null 2>&1 || missing+=(binutils)
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3 python3-venv)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "tools/ensure-deps.sh: missing ${missing[*]} (Debian package names) and no apt-get to install them; install them, then run again" >&2
        exit 1
    fi
    echo "tools/ensure-deps.sh: installing ${missing[*]} with apt-get" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ "$set_name" = test ] || exit 0

# The browser tests' packages, as locked; the copy of the lock file they were installed
# from says whether they still match it.
browser="$(dirname "$0")/browser"
if ! cmp -s "$browser/package-lock.json" "$browser/node_modules/.installed-lock.json"; then
    echo "tools/ensure-deps.sh: installing tools/browser's npm packages (npm ci)" >&2
    (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    cp "$browser/package-lock.json" "$browser/node_modules/.installed-lock.json"
fi
# promtool: Debian ships it only inside the `prometheus` package (19 MB download, 96 MB
# installed, with a server, a system user and JavaScript libraries). Only its promtool
# binary is needed, so the .deb is downloaded and that one file extracted to
# target/tools/promtool: nothing is installed, no service started.
promtool="$(dirname "$0")/../target/tools/promtool"
if ! command -v promtool >/dev/null 2>&1 && [ ! -x "$promtool" ]; then
    if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
        echo "tools/ensure-deps.sh: promtool is missing and there is no apt-get/dpkg-deb to fetch it; install Prometheus's promtool on the PATH, then run again" >&2
        exit 1
    fi
    echo "tools/ensure-deps.sh: extracting promtool from Debian's prometheus package" >&2
    deb=$(mktemp -d)
    trap 'rm -rf "$deb"' EXIT
    # A fresh machine's package lists may not know it yet.
    (cd "$deb" && { apt-get download -qq prometheus >/dev/null 2>&1 \
        || { $sudo apt-get update -qq && apt-get download -qq prometheus >/dev/null; }; })
    mkdir -p "$(dirname "$promtool")"
    dpkg-deb --fsys-tarfile "$deb"/prometheus_*.deb | tar -xO ./usr/bin/promtool > "$promtool.tmp"
    chmod 755 "$promtool.tmp"
    mv "$promtool.tmp" "$promtool"
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
