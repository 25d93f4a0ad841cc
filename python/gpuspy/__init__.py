"""gpuspy: explains why a GPU job is slow, from the CUDA driver calls it makes.

The tool is the `gpuspy` binary that the wheel installs on PATH; this package only lets
`python -m gpuspy` run it.
"""

import os
import shutil
import sys
import sysconfig


def find_gpuspy_bin():
    """The installed `gpuspy` binary: in this environment's scripts directory (a venv or a
    system prefix), else the user scheme's (`pip install --user`), else on PATH."""
    dirs = [sysconfig.get_path("scripts")]
    # get_preferred_scheme is 3.10+.
    get_scheme = getattr(sysconfig, "get_preferred_scheme", lambda _: "posix_user")
    user_scheme = get_scheme("user")
    try:
        dirs.append(sysconfig.get_path("scripts", scheme=user_scheme))
    except KeyError:
        pass
    for d in dirs:
        path = os.path.join(d, "gpuspy")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path

    path = shutil.which("gpuspy")
    if path is None:
        raise FileNotFoundError("the gpuspy binary is not installed beside this Python package")
    return path


def main():
    gpuspy = find_gpuspy_bin()
    os.execv(gpuspy, [gpuspy, *sys.argv[1:]])
