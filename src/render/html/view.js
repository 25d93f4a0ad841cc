// gpuspy's report and diff pages: draws the JSON in <script id="data"> as hand-written SVG
// (and one canvas heat map). No library and no network: the page must open from disk and
// as a CI artifact. Formats only: every figure is in the data (docs/views.md).
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6fdf", "#d9480f", "#2b8a3e", "#ae3ec9", "#e8590c", "#1098ad", "#5c940d", "#c2255c"];
  const app = document.getElementById("app");
  app.textContent = "";

  // ---- elements -------------------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const kid of kids.flat()) {
      if (kid != null) e.append(kid instanceof Node ? kid : String(kid));
    }
    return e;
  }
  function s(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    return e;
  }
  function section(title, ...kids) {
    app.append(h("h2", {}, title), ...kids);
  }
  function table(head, rows, numeric) {
    const th = head.map((c, i) => h("th", numeric[i] ? { class: "n" } : {}, c));
    return h("table", {}, h("thead", {}, h("tr", {}, th)),
      h("tbody", {}, rows.map((r) => {
        const tr = h("tr", r.cls ? { class: r.cls } : {});
        r.cells.forEach((c, i) => tr.append(h("td", numeric[i] ? { class: "n" } : {}, c)));
        return tr;
      })));
  }

  // ---- units (as the text report) ---------------------------------------------------
  function dur(ns) {
    if (ns < 1000) return Math.round(ns) + " ns";
    const [v, u] = ns < 1e6 ? [ns / 1e3, "us"] : ns < 1e9 ? [ns / 1e6, "ms"] : [ns / 1e9, "s"];
    return v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + u;
  }
  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return i === 0 ? n + " B" : n.toFixed(1) + " " + units[i];
  }
  const pct = (x) => (x == null ? "-" : (x * 100).toFixed(1) + " %");
  function num(x) {
    const a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (x / 1e6).toFixed(1) + "M";
    if (a >= 1e3) return (x / 1e3).toFixed(1) + "k";
    return a >= 10 || a === 0 ? x.toFixed(0) : x.toFixed(1);
  }
  const secs = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(1) : x.toFixed(2)) + " s";

  // ---- chart frame ------------------------------------------------------------------
  const M = { l: 62, r: 14, t: 20, b: 22 };
  function frame(w, hgt, title) {
    const svg = s("svg", { class: "chart", viewBox: `0 0 ${w} ${hgt}`, width: w, height: hgt, role: "img" });
    svg.append(s("text", { x: M.l, y: 13, style: "font-weight:600;fill:#1d2330" }, title));
    return svg;
  }
  // Moves every label of a drawn chart that would be cut at its left or right edge inside
  // (2 px in), and the time axis's labels right of the count axis's: a label at the end of
  // its axis is centred on its tick only as far as it fits.
  function keepLabelsInside(svg, w) {
    for (const t of svg.querySelectorAll("text")) {
      const b = t.getBBox(), x = Number(t.getAttribute("x"));
      const lo = t.classList.contains("x-label") ? M.l - 4 : 2, hi = w - 2;
      const shift = b.x < lo ? lo - b.x : b.x + b.width > hi ? hi - b.x - b.width : 0;
      if (shift) t.setAttribute("x", (x + shift).toFixed(1));
    }
  }
  function yAxis(svg, w, hgt, max, fmt) {
    for (const v of [0, max / 2, max]) gridline(svg, w, hgt - M.b - (v / max) * (hgt - M.t - M.b), fmt(v));
  }
  function gridline(svg, w, y, label) {
    svg.append(s("line", { class: "gridline", x1: M.l, x2: w - M.r, y1: y, y2: y }));
    svg.append(s("text", { x: M.l - 6, y: y + 4, "text-anchor": "end" }, label));
  }
  // Powers of ten from lo to hi (every other one when there are many); on an axis of less
  // than two decades the 2s and 5s between them too, so that it still has labels.
  function logTicks(lo, hi) {
    const out = [];
    for (let p = Math.floor(Math.log10(lo)); p <= Math.ceil(Math.log10(hi)); p++) out.push(10 ** p);
    const inside = (t) => t >= lo * 0.999 && t <= hi * 1.001;
    if (hi / lo >= 100) return (out.length > 7 ? out.filter((_, i) => i % 2 === 0) : out).filter(inside);
    return out.flatMap((t) => [t, 2 * t, 5 * t]).filter(inside);
  }
  function niceStep(span, n) {
    const raw = span / n, p = 10 ** Math.floor(Math.log10(raw));
    return [1, 2, 5, 10].map((m) => m * p).find((st) => st >= raw);
  }
  function legend(items) {
    return h("div", { class: "legend" }, items.map((it) => h("span", {}, h("i", { style: `background:${it.color}` }), it.name)));
  }

  // ---- the zoomable timeline -----------------------------------------------------------
  // Every timeline chart shares one view [from, to) in seconds from the job grid's start;
  // dragging across any chart zooms all of them, a double click (or the button) resets.
  const timeline = { charts: [], full: [0, 1], view: [0, 1] };
  function redrawTimeline() {
    for (const c of timeline.charts) c();
    const z = document.getElementById("zoom-state");
    if (z) z.textContent = `showing ${secs(timeline.view[0])} to ${secs(timeline.view[1])}`;
  }
  function zoomTo(from, to) {
    timeline.view = [Math.max(timeline.full[0], from), Math.min(timeline.full[1], to)];
    redrawTimeline();
  }

  // A step chart of per-slot values on a grid; `stacked` draws areas on top of each other.
  function timeChart(parent, spec) {
    const W = 1120, H = spec.height || 150;
    const svg = frame(W, H, spec.title);
    parent.append(svg, legend(spec.series));
    const step = spec.grid.step_ns / 1e9;
    const draw = () => {
      while (svg.childNodes.length > 1) svg.lastChild.remove();
      const [from, to] = timeline.view;
      const x = (t) => M.l + ((t - from) / (to - from)) * (W - M.l - M.r);
      const first = Math.max(0, Math.floor(from / step)), last = Math.min(spec.grid.slots, Math.ceil(to / step));
      let max = spec.yMax || 0;
      const base = new Array(spec.grid.slots).fill(0);
      const tops = spec.series.map((se) => se.values.map((v, i) => {
        const top = (spec.stacked ? base[i] : 0) + (v || 0);
        if (spec.stacked) base[i] = top;
        return v == null ? null : top;
      }));
      if (!spec.yMax) for (const t of tops) for (let i = first; i < last; i++) if (t[i] > max) max = t[i];
      max = max > 0 ? max * (spec.yMax ? 1 : 1.08) : 1;
      const y = (v) => H - M.b - (Math.min(v, max) / max) * (H - M.t - M.b);
      // The scales, for tools/browser/check.mjs to read values back from the drawing.
      Object.assign(svg.dataset, { view: `${from} ${to}`, step, plot: `${M.l} ${W - M.r} ${H - M.b} ${M.t}`, yMax: max });
      yAxis(svg, W, H, max, spec.fmt);
      const tick = niceStep(to - from, 8);
      for (let t = Math.ceil(from / tick) * tick; t <= to; t += tick) {
        svg.append(s("line", { class: "axis", x1: x(t), x2: x(t), y1: H - M.b, y2: H - M.b + 4 }));
        svg.append(s("text", { class: "x-label", x: x(t), y: H - 6, "text-anchor": "middle" }, secs(t)));
      }
      let labelsEnd = -Infinity;
      for (const p of spec.phases) {
        const a = Math.max(from, p.start), b = Math.min(to, p.end);
        if (b <= a) continue;
        svg.append(s("rect", { class: "phase", x: x(a), y: M.t, width: x(b) - x(a), height: H - M.t - M.b }));
        // A label starts at its phase, or ends at the chart's edge; one that would run into
        // the label before it is left out (the phase's shading stays).
        const label = s("text", { class: "phase-label", x: x(a) + 3, y: M.t + 10 }, p.name);
        svg.append(label);
        const width = label.getComputedTextLength();
        const at = Math.min(x(a) + 3, W - M.r - width);
        if (at < labelsEnd + 6) label.remove();
        else { label.setAttribute("x", at.toFixed(1)); labelsEnd = at + width; }
      }
      // A slot with no value (nothing observed it) is a gap: each run of slots with values
      // is its own line, or its own closed area, so nothing is drawn across a gap.
      const left = (i) => x(Math.max(from, i * step)).toFixed(1), right = (i) => x(Math.min(to, (i + 1) * step)).toFixed(1);
      spec.series.forEach((se, k) => {
        const top = tops[k];
        let d = "";
        for (let i = first; i < last; i++) {
          if (top[i] == null) continue;
          let j = i;
          while (j + 1 < last && top[j + 1] != null) j++;
          let run = "";
          for (let m = i; m <= j; m++) run += `${m === i ? "M" : "L"}${left(m)} ${y(top[m]).toFixed(1)}H${right(m)}`;
          if (spec.stacked) {
            for (let m = j; m >= i; m--) run += `L${right(m)} ${y(top[m] - (se.values[m] || 0)).toFixed(1)}H${left(m)}`;
            run += "Z";
          }
          d += run;
          i = j;
        }
        if (!d) return;
        svg.append(spec.stacked
          ? s("path", { d, fill: se.color, "fill-opacity": 0.55, stroke: se.color, "stroke-width": 1 })
          : s("path", { d, fill: "none", stroke: se.color, "stroke-width": 1.5 }));
      });
      svg.append(s("line", { class: "axis", x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b }));
      keepLabelsInside(svg, W);
    };
    brush(svg, W, (a, b) => {
      const [from, to] = timeline.view, t = (px) => from + ((px - M.l) / (W - M.l - M.r)) * (to - from);
      zoomTo(t(a), t(b));
    });
    timeline.charts.push(draw);
  }

  function brush(svg, W, done) {
    let start = null, rect = null;
    const at = (ev) => {
      const box = svg.getBoundingClientRect();
      return Math.min(W - M.r, Math.max(M.l, ((ev.clientX - box.left) / box.width) * W));
    };
    svg.addEventListener("mousedown", (ev) => {
      start = at(ev);
      rect = s("rect", { class: "brush", x: start, y: M.t, width: 0, height: svg.viewBox.baseVal.height - M.t - M.b });
      svg.append(rect);
    });
    svg.addEventListener("mousemove", (ev) => {
      if (start == null) return;
      const x = at(ev);
      rect.setAttribute("x", Math.min(start, x));
      rect.setAttribute("width", Math.abs(x - start));
    });
    window.addEventListener("mouseup", (ev) => {
      if (start == null) return;
      const x = at(ev), a = Math.min(start, x), b = Math.max(start, x);
      start = null;
      rect.remove();
      if (b - a > 4) done(a, b);
    });
    svg.addEventListener("dblclick", () => zoomTo(...timeline.full));
  }

  // ---- histograms and bars ------------------------------------------------------------------
  // Latency histogram: the dump's log-linear buckets on a log time axis; counts on a log
  // axis of 1 + count, from 0 at the base to the power of ten above the largest, so that a
  // bucket of one call is as visible as the axis allows (full height when it is the most).
  function histogram(parent, title, buckets, domain, color) {
    const W = 540, H = 170;
    const svg = frame(W, H, title);
    parent.append(svg);
    const [lo, hi] = domain || histDomain([buckets]);
    const lx = (v) => M.l + ((Math.log10(Math.max(v, 1)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (W - M.l - M.r);
    const top = 10 ** Math.ceil(Math.log10(Math.max(...buckets.map((b) => b[2]), 1)));
    const y = (n) => H - M.b - (Math.log10(1 + n) / Math.log10(1 + top)) * (H - M.t - M.b);
    // 0 only where it stays apart from 1.
    for (const v of (top <= 100 ? [0] : []).concat(logTicks(1, top))) gridline(svg, W, y(v), v < 1000 ? String(v) : num(v));
    let d = "";
    for (const [a, b, n] of buckets) {
      if (!n) continue;
      const x0 = lx(a), x1 = Math.max(lx(b), x0 + 3);
      d += `M${x0.toFixed(1)} ${H - M.b}V${y(n).toFixed(1)}H${x1.toFixed(1)}V${H - M.b}Z`;
    }
    svg.append(s("path", { d, fill: color || COLORS[0] }));
    for (const t of logTicks(lo, hi)) svg.append(s("text", { class: "x-label", x: lx(t), y: H - 6, "text-anchor": "middle" }, dur(t)));
    svg.append(s("line", { class: "axis", x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b }));
    keepLabelsInside(svg, W);
  }
  // The time axis of histograms: the buckets' span with a margin, at least a factor of 10.
  function histDomain(lists) {
    const all = lists.flat().filter((b) => b[2] > 0);
    if (!all.length) return [1, 10];
    let lo = Math.max(1, Math.min(...all.map((b) => b[0])) / 1.25);
    let hi = Math.max(...all.map((b) => b[1])) * 1.25;
    const widen = Math.sqrt(10 / (hi / lo));
    if (widen > 1) { lo = Math.max(1, lo / widen); hi *= widen; }
    return [lo, Math.max(hi, lo * 10)];
  }

  // Horizontal bars: one row per item, the value drawn against the largest.
  function bars(parent, title, rows) {
    const W = 1120, row = 18, H = M.t + rows.length * row + 8;
    const svg = frame(W, H, title);
    parent.append(svg);
    const max = Math.max(...rows.map((r) => r.value), 1e-12);
    const left = 420, right = 260, width = W - left - right;
    rows.forEach((r, i) => {
      const y = M.t + i * row;
      const label = s("text", { x: left - 8, y: y + 12, "text-anchor": "end" }, r.label);
      svg.append(label);
      // Cut at the end to the room left of the bars.
      const room = left - 12, width = label.getComputedTextLength();
      for (let n = Math.floor((r.label.length * room) / width); width > room && label.getComputedTextLength() > room && n > 1; n -= 2) {
        label.textContent = r.label.slice(0, n - 1) + "…";
      }
      svg.append(s("rect", { x: left, y: y + 2, width: Math.max(1, (r.value / max) * width), height: row - 5, fill: r.color || COLORS[0] }));
      svg.append(s("text", { x: left + (r.value / max) * width + 6, y: y + 12 }, r.text));
    });
    keepLabelsInside(svg, W);
  }

  // Columns per rank: each series one path of thin columns side by side.
  function rankColumns(parent, title, ranks, series, highlight) {
    const W = 1120, H = 170;
    const svg = frame(W, H, title);
    parent.append(svg, legend(series));
    const max = Math.max(...series.flatMap((se) => ranks.map(se.value)).filter((v) => v != null), 1e-9);
    yAxis(svg, W, H, max, pct);
    const slot = (W - M.l - M.r) / ranks.length, wide = slot / series.length;
    series.forEach((se, k) => {
      let d = "";
      ranks.forEach((r, i) => {
        const v = se.value(r);
        if (v == null) return;
        const x0 = M.l + i * slot + k * wide, y = H - M.b - (v / max) * (H - M.t - M.b);
        d += `M${x0.toFixed(2)} ${H - M.b}V${Math.min(y, H - M.b - 1).toFixed(1)}h${Math.max(wide * 0.85, 0.6).toFixed(2)}V${H - M.b}Z`;
      });
      svg.append(s("path", { d, fill: se.color }));
    });
    const at = ranks.findIndex((r) => r.rank === highlight);
    if (at >= 0) {
      const x = M.l + (at + 0.5) * slot;
      svg.append(s("path", { d: `M${x} ${M.t + 2}l-5 -7h10z`, fill: "#b3261e" }));
      svg.append(s("text", { x: x + 8, y: M.t + 2, style: "fill:#b3261e" }, `rank ${highlight}`));
    }
    const every = Math.max(1, Math.ceil(ranks.length / 20));
    ranks.forEach((r, i) => {
      if (i % every === 0) svg.append(s("text", { class: "x-label", x: M.l + (i + 0.5) * slot, y: H - 6, "text-anchor": "middle" }, r.rank));
    });
    svg.append(s("line", { class: "axis", x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b }));
    keepLabelsInside(svg, W);
  }

  // GPU busy share per rank and slot as a heat map on a canvas (1,000 ranks are 1,000 rows).
  function heatmap(parent, ranks, grid) {
    const slots = grid.slots, rows = ranks.length;
    const c = h("canvas", { class: "heatmap", width: slots, height: rows, title: "GPU busy share per rank (rows, by rank) over time (columns)" });
    c.style.height = Math.min(360, Math.max(60, rows * 4)) + "px";
    const g = c.getContext("2d"), img = g.createImageData(slots, rows);
    ranks.forEach((p, r) => {
      p.series.gpu_busy_share.forEach((v, i) => {
        const o = (r * slots + i) * 4;
        if (v == null) { img.data.set([235, 236, 240, 255], o); return; }
        const t = Math.min(1, Math.max(0, v));
        img.data.set([Math.round(250 - 203 * t), Math.round(250 - 139 * t), Math.round(252 - 29 * t), 255], o);
      });
    });
    g.putImageData(img, 0, 0);
    parent.append(h("h3", {}, "GPU busy share per rank over time (white idle, blue busy; rows by rank)"), c);
  }

  // ---- the report page ------------------------------------------------------------------
  function verdictBox(r) {
    const f = r.verdict && r.findings.find((x) => x.id === r.verdict);
    if (f) {
      return h("div", { class: "verdict", id: "verdict" },
        h("div", {}, h("span", { class: "id" }, "Verdict: " + f.id), ` (${f.layer} layer${f.heuristic ? ", heuristic" : ""})`),
        h("div", { class: "fix" }, "Fix: ", h("code", {}, f.fix), ` Estimated time lost: ${(f.impact * 100).toFixed(0)} %.`),
        h("div", {}, f.summary));
    }
    return h("div", { class: "verdict calm", id: "verdict" }, "Verdict: " + r.verdict_text);
  }

  function layers(r) {
    return table(["layer", "status", "findings"], r.layers.map((l) => ({
      cells: [l.layer, h("span", { class: "status-" + l.status }, l.status),
        h("div", {},
          r.findings.filter((f) => f.layer === l.layer).map((f) =>
            h("div", {}, `${f.severity === "warning" ? "!" : "-"} ${f.id}${f.heuristic ? " [heuristic]" : ""}: ${f.summary} (impact ${(f.impact * 100).toFixed(0)} %)`)),
          l.no_data.map(([id, why]) => h("div", { class: "note" }, `? ${id}: ${why}`)))],
    })), [false, false, false]);
  }

  // Phases as spans in seconds from the grid's start (theirs are ns from the report's
  // start_unix_ns).
  function phases(r, grid) {
    const offset = (r.start_unix_ns - grid.start_unix_ns) / 1e9;
    return (r.phases || []).map((p) => ({
      name: p.name || p.kind,
      start: offset + p.start_ns / 1e9,
      end: offset + p.end_ns / 1e9,
    }));
  }

  function timelineSection(r) {
    const t = r.timelines;
    if (!t) {
      section("Timeline", h("p", { class: "note" }, "No time axis in these dumps (no timeline, CUPTI busy series or NVML series)."));
      return;
    }
    const wrap = h("div", { id: "timeline" });
    const reset = h("button", { type: "button" }, "reset zoom");
    reset.addEventListener("click", () => zoomTo(...timeline.full));
    section("Timeline", h("p", { class: "toolbar" }, "Drag across a chart to zoom, double-click to reset. ", h("span", { id: "zoom-state" }), reset), wrap);
    const grid = t.grid, j = t.job;
    timeline.full = [0, (grid.step_ns * grid.slots) / 1e9];
    timeline.view = timeline.full.slice();
    const ph = phases(r, grid);
    const has = (v) => v.some((x) => x != null && x > 0);
    const chart = (title, series, opts) => {
      series = series.filter((se) => has(se.values));
      if (series.length) timeChart(wrap, Object.assign({ title, series, grid, phases: ph }, opts));
    };
    const col = (i) => COLORS[i % COLORS.length];
    chart("GPU busy and idle by cause (share of the time observed)", [{ name: "busy", values: j.gpu_busy_share, color: col(0) }]
      .concat(j.gpu_idle.map((c, i) => ({ name: "idle: " + c.cause, values: c.values, color: col(i + 1) }))), { stacked: true, yMax: 1, fmt: pct });
    chart("Kernel launches per second", [{ name: "launches/s", values: j.launches_per_s, color: col(0) },
      { name: "driver calls/s", values: j.calls_per_s, color: col(3) }], { fmt: num });
    chart("Host blocked (thread-seconds per second, by sync cause)",
      j.blocked.map((c, i) => ({ name: c.cause, values: c.values, color: col(i + 1) })), { stacked: true, fmt: (v) => v.toFixed(2) });
    // NVML per device where there are few, the mean over devices where there are many.
    const devices = t.processes.flatMap((p) => p.devices.map((d) => ({ p, d })));
    const perDevice = devices.length <= 8 && t.process_grid.step_ns === grid.step_ns;
    const nvml = (key, title, fmt, yMax) => {
      const series = perDevice
        ? devices.map(({ p, d }, i) => ({ name: `${p.rank != null ? "rank " + p.rank : "pid " + p.pid} GPU ${d.ordinal}`, values: d[key], color: col(i) }))
        : [{ name: `mean over ${devices.length} devices`, values: j[key], color: col(0) }];
      chart(title, series, { fmt, yMax });
    };
    nvml("gpu_util_pct", "NVML GPU utilisation", (v) => v.toFixed(0) + " %", 100);
    nvml("sm_clock_mhz", "NVML SM clock", (v) => v.toFixed(0) + " MHz");
    nvml("power_w", "NVML power", (v) => v.toFixed(0) + " W");
    nvml("gpu_temp_c", "NVML GPU temperature", (v) => v.toFixed(0) + " C");
    if (!timeline.charts.length) wrap.append(h("p", { class: "note" }, "The time axis holds no non-zero value."));
    redrawTimeline();
  }

  function ranksSection(r) {
    const ranked = r.processes.filter((p) => p.rank != null);
    if (ranked.length < 2) return;
    const straggler = r.findings.find((f) => f.id === "rank-straggler");
    const slow = straggler ? straggler.evidence.rank : null;
    const byRank = ranked.slice().sort((a, b) => a.rank - b.rank);
    const body = h("div", {});
    section(`Ranks (${ranked.length})`, body);
    rankColumns(body, "Straggler view: time waiting per rank (the straggler waits least)", byRank, [
      { name: "host waiting for the GPU (share of steady time)", value: (p) => p.wait_share, color: COLORS[0] },
      { name: "in NCCL kernels (GPU, share of steady time)", value: (p) => p.nccl_share, color: COLORS[1] },
    ], slow);
    const spread = r.rank_imbalance.filter((i) => i.median > 0).map((i) => `${i.measure} ${i.ratio.toFixed(2)}x (rank ${i.rank})`);
    if (spread.length) body.append(h("p", { class: "sub" }, "Largest rank / median: " + spread.join(", ")));
    const t = r.timelines;
    if (t) {
      const withBusy = t.processes.filter((p) => p.rank != null && p.series.gpu_busy_share.some((v) => v != null)).sort((a, b) => a.rank - b.rank);
      if (withBusy.length >= 2) heatmap(body, withBusy, t.process_grid);
    }
    // 16 rows (the 8 that wait least, straggler candidates, and the 8 that wait most) as in
    // the text report; all of them on request: a 1,000-row table costs the page's load.
    const rows = ranked.slice().sort((a, b) => a.wait_share - b.wait_share).map((p) => ({
      cls: p.rank === slow ? "straggler" : null,
      cells: [p.rank, p.host, p.pid, dur(p.steady_ns), pct(p.wait_share), pct(p.nccl_share), p.launches, p.verdict || "no warning"],
    }));
    const SHOWN = 8;
    const cut = rows.length > 2 * SHOWN;
    const shown = cut ? rows.slice(0, SHOWN).concat([{ cells: [`… ${rows.length - 2 * SHOWN} more ranks …`, "", "", "", "", "", "", ""] }], rows.slice(-SHOWN)) : rows;
    const head = ["rank", "host", "pid", "steady", "waiting", "in NCCL", "launches", "verdict"];
    const numeric = [true, false, true, true, true, true, true, false];
    const holder = h("div", { class: "scroll" }, table(head, shown, numeric));
    body.append(h("h3", {}, "By share of time waiting for the GPU"), holder);
    if (cut) {
      const all = h("button", { type: "button" }, `show all ${rows.length} ranks`);
      all.addEventListener("click", () => { holder.replaceChildren(table(head, rows, numeric)); all.remove(); });
      body.append(all);
    }
  }

  function report(r) {
    const procs = r.processes.length;
    app.append(h("h1", {}, "gpuspy report"),
      h("p", { class: "sub" }, `${procs} process${procs === 1 ? "" : "es"}, wall ${dur(r.wall_ns)}, inside the driver ${dur(r.driver_ns)} (${pct(r.driver_share)} of ${procs > 1 ? "process time" : "wall"})`),
      r.simulated ? h("p", { class: "simulated", id: "simulated" }, r.simulated) : null,
      verdictBox(r));
    section("Layers, bottom up", layers(r));
    timelineSection(r);
    ranksSection(r);
    if (r.apis.length) {
      const g = h("div", { class: "grid" });
      section("Latency per API (log axes; by total time)", g);
      r.apis.forEach((a, i) => {
        const card = h("div", { class: "card" });
        g.append(card);
        histogram(card, `${a.api}: ${a.count} calls, p50 ${dur(a.p50_ns)}, p99 ${dur(a.p99_ns)}`, a.buckets, null, COLORS[i % COLORS.length]);
      });
    }
    if (r.syncs.length) {
      const body = h("div", {});
      section("Syncs by cause (host blocked)", body);
      bars(body, "Time blocked per cause", r.syncs.map((x) => ({ label: x.cause, value: x.total_ns, text: `${dur(x.total_ns)} in ${x.count} calls (${pct(x.wall_share)})` })));
      const g = h("div", { class: "grid" });
      body.append(g);
      for (const x of r.syncs) {
        const card = h("div", { class: "card" });
        g.append(card);
        histogram(card, `${x.cause}: p50 ${dur(x.p50_ns)}, p99 ${dur(x.p99_ns)}`, x.buckets, null, COLORS[1]);
      }
    }
    if (r.copies.length) {
      const body = h("div", {});
      section("Copies (bytes by direction and host memory)", body);
      bars(body, "Bytes copied", r.copies.map((c) => ({ label: `${c.direction} ${c.host}`, value: c.bytes, text: `${bytes(c.bytes)} in ${c.count} calls`, color: c.host === "pageable" ? COLORS[1] : COLORS[0] })));
    }
    gpuSection(r);
  }

  // What NVML and CUPTI did in each process (or why there is no GPU-side data), then the
  // top kernels and GPU copies per device: the text report's GPU section.
  function gpuSection(r) {
    const body = h("div", { id: "gpu" });
    section("GPU (what the device reported: NVML telemetry, CUPTI activity)", body);
    if (r.no_gpu_data) {
      body.append(h("p", { class: "note" }, r.no_gpu_data));
      return;
    }
    const state = (x) => `${x.active ? "on" : "off"}, ${x.note}`;
    body.append(table(["process", "NVML", "CUPTI"], r.gpu_sources.map((g) => ({
      cells: [g.rank != null ? `rank ${g.rank} (pid ${g.pid})` : `pid ${g.pid}`, state(g.nvml), state(g.cupti)],
    })), [false, false, false]));
    const more = r.gpu_processes - r.gpu_sources.length;
    if (more > 0) body.append(h("p", { class: "note" }, `${more} more processes in --json`));
    for (const d of r.devices.filter((x) => x.top_kernels.length)) {
      const who = `${d.rank != null ? "rank " + d.rank : "pid " + d.pid}, GPU ${d.ordinal}${d.name ? " " + d.name : ""}, busy ${pct(d.busy_share)}`;
      bars(body, who, d.top_kernels.map((k) => ({ label: k.name, value: k.total_ns, text: `${pct(k.share)}, ${k.calls} x, ${dur(k.total_ns)}` })));
      if (d.copies.length) {
        body.append(table(["GPU copies", "memory", "count", "bytes", "time"], d.copies.map((c) => ({ cells: [c.kind, c.memory, c.count, bytes(c.bytes), dur(c.ns)] })), [false, false, true, true, true]));
      }
      for (const w of d.warnings) body.append(h("p", { class: "status-warning" }, "! " + w));
    }
  }

  // ---- the diff page ------------------------------------------------------------------
  function diff(d) {
    app.append(h("h1", {}, "gpuspy diff"),
      h("p", { class: "sub" }, `${d.base_runs} base run(s), ${d.new_runs} new run(s)`),
      h("div", { class: d.regressions ? "verdict" : "verdict calm", id: "verdict" },
        d.regressions ? `Result: ${d.regressions} regression(s)` : "Result: no significant regression"));
    for (const n of d.notes) app.append(h("p", { class: "note" }, "note: " + n));
    section("Comparisons", table(["result", "what", "base", "new", "detail"], d.changes.map((c) => ({
      cells: [h("span", { class: "kind-" + c.kind }, c.kind), c.what, c.base, c.new, c.detail],
    })), [false, false, true, true, false]));
    if (d.latencies.length) {
      const body = h("div", {});
      section("Latency histograms, base and new (log axes, same scale per API)", body);
      for (const l of d.latencies) {
        const g = h("div", { class: "grid" });
        body.append(h("h3", {}, l.api), g);
        const dom = histDomain([l.base.buckets, l.new.buckets]);
        for (const [side, x, color] of [["base", l.base, COLORS[0]], ["new", l.new, COLORS[1]]]) {
          const card = h("div", { class: "card" });
          g.append(card);
          histogram(card, `${side}: ${x.count} calls, p50 ${dur(x.p50_ns)}, p99 ${dur(x.p99_ns)}`, x.buckets, dom, color);
        }
      }
    }
  }

  (DATA.kind === "diff" ? diff : report)(DATA.page);
})();
