"""Per workload and form, the median predicted impact and the median saving over the
rounds of bench/calibration.sh's tables (read from stdin; whole percentages, as they
print), and whether the medians meet issue 13's bar: a single run's saving moves by
several points between runs and between the two halves of one loop, so one round's row
can miss on noise alone."""
import re
import statistics
import sys

from phases_table import meets_bar

rows = {}
form = None
for line in sys.stdin:
    m = re.match(r"== \S+ (\w+)$", line.strip())
    if m:
        form = m.group(1)
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if form is None or len(cells) != 10 or not cells[4].endswith("%") or not cells[5].endswith("%"):
        continue
    rows.setdefault((cells[0], form), []).append((int(cells[4][:-1]) / 100, int(cells[5][:-1]) / 100))

print("| workload | form | rounds | predicted: median (range) | saved: median (range) | bar on the medians |")
print("|---|---|---|---|---|---|")
met = 0
for (workload, form), pairs in sorted(rows.items()):
    predicted = [p for p, _ in pairs]
    saved = [s for _, s in pairs]
    mp, ms = statistics.median(predicted), statistics.median(saved)
    ok = meets_bar(mp, ms)
    met += ok
    span = lambda xs: f"{min(xs):.0%}-{max(xs):.0%}"
    print(f"| {workload} | {form} | {len(pairs)} | {mp:.0%} ({span(predicted)}) | {ms:.0%} ({span(saved)}) | {'met' if ok else 'MISSED'} |")
print(f"== medians within the bar: {met} of {len(rows)}")
