"""PEP 517 backend for `pip install .`: maturin, after building libgpuspy.so.

maturin builds the `gpuspy` binary (`bindings = "bin"`) but not the shim, a second crate.
So before each wheel this builds the shim with cargo, in the same target directory and
release profile as maturin's build, and stages it where pyproject.toml's
`[tool.maturin] data` points: `data/lib/gpuspy/libgpuspy.so` inside it installs at
`<prefix>/lib/gpuspy/libgpuspy.so`. Beside it go the fake driver, CUPTI and NVML that
`gpuspy demo` runs against, under the names cargo gives them (no program loads a real
library by those). Every other hook is maturin's own.
"""

import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import maturin

ROOT = Path(__file__).resolve().parents[2]
# pyproject.toml's [tool.maturin] data.
DATA = ROOT / "target" / "wheel-data"
# What the wheel installs in <prefix>/lib/gpuspy/: the shim, and the fakes `gpuspy demo`
# finds beside it (src/cmd/demo.rs, FAKES).
SHIPPED = ["libgpuspy.so", "libcuda.so", "libcupti.so", "libnvidia_ml.so"]


def _stage_libraries():
    cargo = os.environ.get("CARGO", "cargo")
    # The workspace's default build, as tools/main.sh and tools/test.sh make it: the same
    # shim they test (`-p gpuspy-shim` alone unifies dependency features differently and
    # would rebuild it), and nothing to rebuild after them. The fake drivers it also
    # builds are small.
    subprocess.run([cargo, "build", "--release"], cwd=ROOT, check=True)
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.PIPE,
    )
    built = Path(json.loads(meta.stdout)["target_directory"]) / "release"
    # Only these: whatever else is under DATA would be installed too.
    shutil.rmtree(DATA, ignore_errors=True)
    dest = DATA / "data" / "lib" / "gpuspy"
    dest.mkdir(parents=True)
    for name in SHIPPED:
        shutil.copy2(built / name, dest / name)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _stage_libraries()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _stage_libraries()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


def _data_dir(hook):
    """`hook`, with the data directory present: maturin refuses to run without it, even for
    the metadata or the sdist, which do not need the shim built."""

    def wrapped(*args, **kwargs):
        DATA.mkdir(parents=True, exist_ok=True)
        return hook(*args, **kwargs)

    return wrapped


def build_sdist(sdist_directory, config_settings=None):
    """maturin's sdist with the workspace's own Cargo.toml put back. maturin keeps only the
    workspace members the CLI crate depends on (shim/format), so the sdist would have no
    shim to build; pyproject.toml's `include` adds the shim and the fake drivers, and the
    original manifest makes them members again, as in a clone."""
    DATA.mkdir(parents=True, exist_ok=True)
    name = maturin.build_sdist(sdist_directory, config_settings)
    path = Path(sdist_directory) / name
    with tarfile.open(path, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]
    manifest = (ROOT / "Cargo.toml").read_bytes()
    top = members[0][0].name.split("/")[0]
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for member, data in members:
            if member.name == f"{top}/Cargo.toml":
                data = manifest
                member.size = len(data)
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
    return name


get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
get_requires_for_build_editable = maturin.get_requires_for_build_editable
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist
prepare_metadata_for_build_wheel = _data_dir(maturin.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _data_dir(maturin.prepare_metadata_for_build_editable)
