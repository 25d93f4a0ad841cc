#!/usr/bin/env bash
# Builds the pip wheel the way `pip install .` does (PEP 517, an isolated build environment
# with maturin from PyPI, the in-tree backend tools/pep517/gpuspy_build.py), tagged with the
# manylinux tag in pyproject.toml's [tool.gpuspy], and leaves it in target/wheels/. Then
# checks it: `auditwheel show` agrees with the tag; the sdist holds the whole workspace (the
# shim a member); and from a fresh venv with nothing but the wheel installed, the installed
# command finds its shim, `gpuspy demo` runs against the fakes the wheel ships, the installed
# command profiles the simulated C job against the fake driver and reports on it, and
# `LD_PRELOAD=$(gpuspy shim-path)` works too.
# Called by .ci/run; needs PyPI. Reuses the cargo target dir: after tools/main.sh it
# compiles nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure-deps.sh test
root=$PWD
tag=$(sed -n 's/^manylinux = "\(.*\)"$/\1/p' pyproject.toml)
[ -n "$tag" ] || { echo "wheel-check: no [tool.gpuspy] manylinux in pyproject.toml" >&2; exit 1; }
version=$(cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "gpuspy"))')
work=$(mktemp -d -t gpuspy-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "wheel-check: FAILED: $*" >&2; exit 1; }

echo "== wheel-check: building the $tag wheel (pip wheel ., as pip install . does)"
python3 -m venv "$work/build"
rm -f target/wheels/gpuspy-*.whl
MATURIN_PEP517_ARGS="--compatibility $tag" \
    "$work/build/bin/pip" wheel -q --no-deps -w target/wheels .
wheel=$(ls target/wheels/gpuspy-"$version"-py3-none-"$tag"_x86_64.whl) \
    || fail "no gpuspy-$version-py3-none-${tag}_x86_64.whl in target/wheels"

# maturin audits only the binary it built; auditwheel reads every ELF file in the wheel,
# the staged shim included.
"$work/build/bin/pip" install -q 'auditwheel>=6.8,<7'
audit=$("$work/build/bin/auditwheel" show "$wheel" | tr '\n' ' ')
echo "$audit" | grep -q "consistent with the following platform tag: \"${tag}_x86_64\"" \
    || fail "auditwheel show does not give ${tag}_x86_64: $audit"
echo "   auditwheel: consistent with ${tag}_x86_64"

echo "== wheel-check: the sdist is the workspace (the shim is a member, as in a clone)"
"$work/build/bin/pip" install -q 'build>=1,<2'
"$work/build/bin/python" -m build -q --sdist -o "$work/sdist" . >/dev/null
python3 - "$work/sdist/gpuspy-$version.tar.gz" <<'PY'
import sys, tarfile, tomllib
with tarfile.open(sys.argv[1]) as tar:
    top = tar.getnames()[0].split("/")[0]
    names = set(tar.getnames())
    manifest = tomllib.load(tar.extractfile(f"{top}/Cargo.toml"))
members = manifest["workspace"]["members"]
for path in ["shim/Cargo.toml", "shim/src/lib.rs", "tools/pep517/gpuspy_build.py", "tools/fakecuda/Cargo.toml"]:
    assert f"{top}/{path}" in names, f"the sdist has no {path}"
assert "shim" in members, f"the sdist's workspace members are {members}"
PY

echo "== wheel-check: installing $(basename "$wheel") into a fresh venv"
python3 -m venv "$work/env"
env="$work/env"
"$env/bin/pip" install -q --no-index "$wheel"
# What the wheel installed, not this checkout's build: no cargo paths on PATH.
export PATH="$env/bin:/usr/bin:/bin"
gpuspy="$env/bin/gpuspy"
[ "$(command -v gpuspy)" = "$gpuspy" ] || fail "gpuspy is not on the venv's PATH"
# `gpuspy VERSION (BUILD)`: the wheel was built from this checkout, so BUILD names its
# commit (marked -dirty where the sources differed from it when they were last built).
build=$(git describe --always 2>/dev/null || echo unknown)
version_ok() { [ "$1" = "gpuspy $version ($build)" ] || [ "$1" = "gpuspy $version ($build-dirty)" ]; }
version_ok "$(gpuspy --version)" || fail "gpuspy --version: $(gpuspy --version), not gpuspy $version ($build)"
version_ok "$("$env/bin/python" -m gpuspy --version)" || fail "python -m gpuspy --version"
shim=$(gpuspy shim-path)
[ "$shim" = "$(realpath "$env/lib/gpuspy/libgpuspy.so")" ] \
    || fail "gpuspy shim-path gave $shim, not the venv's lib/gpuspy/libgpuspy.so"
echo "   $(gpuspy --version), shim at $shim"

echo "== wheel-check: gpuspy demo, against the fakes the wheel ships"
for fake in libcuda.so libcupti.so libnvidia_ml.so; do
    [ -f "$env/lib/gpuspy/$fake" ] || fail "the wheel installed no lib/gpuspy/$fake"
done
gpuspy demo -o "$work/demo" >"$work/demo.txt" || fail "gpuspy demo failed: $(cat "$work/demo.txt")"
grep -qx "SIMULATED: .*" "$work/demo.txt" || fail "gpuspy demo's report says no SIMULATED"
! grep -q "needs " "$work/demo.txt" || fail "gpuspy demo left rules without data: $(grep "needs " "$work/demo.txt")"
gpuspy report --json "$work/demo" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r.get("simulated") is True, "report --json of the demo has no simulated: true"
apis = {a["api"]: a["count"] for a in r["apis"]}
assert apis.get("cuLaunchKernel") == 40000, apis'

echo "== wheel-check: SIMULATED job under the installed gpuspy (fake libcuda.so.1)"
driver="$work/fake-driver"
mkdir -p "$driver"
cp target/release/libcuda.so "$driver/libcuda.so.1"
cp target/release/libcuda.so "$driver/libcuda.so"
cc -O1 -o "$work/simulated_step" examples/simulated_step.c -L"$driver" -lcuda
LD_LIBRARY_PATH="$driver" FAKECUDA_DELAY_NS="cuStreamSynchronize=400000,cuLaunchKernel=4000" \
    gpuspy run -o "$work/out" -- "$work/simulated_step" 50
gpuspy report "$work/out" >"$work/report.txt"
gpuspy report --json "$work/out" >"$work/report.json"
# 50 steps of 40 launches and one sync each: exact counts, from the installed shim.
python3 - "$work/report.json" <<'PY'
import json, sys
apis = {a["api"]: a["count"] for a in json.load(open(sys.argv[1]))["apis"]}
want = {"cuLaunchKernel": 2000, "cuStreamSynchronize": 50}
got = {k: apis.get(k) for k in want}
assert got == want, f"report counts {got}, expected {want}"
PY
grep -q cuStreamSynchronize "$work/report.txt" || fail "the text report names no cuStreamSynchronize"

echo "== wheel-check: LD_PRELOAD=\$(gpuspy shim-path) without gpuspy run"
LD_PRELOAD="$(gpuspy shim-path)" GPUSPY_OUT="$work/preloaded" LD_LIBRARY_PATH="$driver" \
    "$work/simulated_step" 3 >/dev/null
gpuspy report --json "$work/preloaded" | python3 -c '
import json, sys
apis = {a["api"]: a["count"] for a in json.load(sys.stdin)["apis"]}
assert apis.get("cuLaunchKernel") == 120, apis'
echo "== wheel-check: OK: $wheel"
