"""One line per gpuspy dump folder: whether CUPTI's kernel records stopped and came back.

For each folder given: its name, the times CUPTI was attached anew because kernel records
had stopped, switched the traced kinds off, and detached in all (from the CUPTI note), kernel
records per host launch (raw records over
launches while recording cannot be told from the dump, so the activity's extrapolated
kernels over all launches: about 1 when every record came), and the timeline's windows as
one character each: '#' some kernel time, '.' launches but no kernel time, ' ' neither.

Usage: python3 stuck_lines.py DUMP_DIR..."""
import glob
import json
import re
import sys

for folder in sys.argv[1:]:
    for path in sorted(glob.glob(folder + "/*.json")):
        dump = json.load(open(path))
        gpu = dump.get("gpu") or {}
        note = (gpu.get("cupti") or {}).get("note", "")
        restarts = re.search(r"detached (\d+) times because kernel records had stopped", note)
        switched = re.search(r"switched the traced kinds off (\d+) times", note)
        detached = re.search(r"detached between recording slots (\d+) times", note)
        timeline = dump.get("timeline") or {}
        launches = timeline.get("host", {}).get("launches", [])
        devices = timeline.get("devices", [])
        busy = devices[0]["busy_ns"] if devices else [0] * len(launches)
        kernels = sum((d.get("activity") or {}).get("kernels", 0) for d in gpu.get("devices", []))
        made = sum(launches)
        windows = "".join("#" if b > 0 else "." if n > 0 else " " for b, n in zip(busy, launches))
        print(
            f"{folder.rstrip('/').split('/')[-1]:<22} restarts {restarts.group(1) if restarts else 0}"
            f"  switched off {switched.group(1) if switched else 0}"
            f"  detached {detached.group(1) if detached else 0}"
            f"  kernels/launch {kernels / max(made, 1):.2f}  |{windows.rstrip()}|"
        )
