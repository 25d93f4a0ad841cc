// Loads gpuspy HTML pages in the system's headless Chromium (Debian package `chromium`,
// driven by puppeteer-core, which downloads no browser) and prints one JSON line per load:
//   {"file", "load_ms", "verdict", "charts", "empty_charts", "canvases", "empty_canvases",
//    "labels_outside", "labels_overlapping", "gaps_crossed", "blocked_max", "threads",
//    "zoom", "errors": [...]}
// `load_ms` is from navigation start to the end of the load event (the page's own
// performance timing; the browser's start is not in it). `errors` holds console errors,
// uncaught exceptions and any request that is not the file itself (the page must need no
// network). `zoom` is null without a timeline, else the timeline's "showing A to B" line
// before a drag across its first chart, after it, and after a double click there.
// `labels_outside` lists the labels whose box passes their chart's bounds and
// `labels_overlapping` the pairs of labels of one chart whose boxes intersect, as
// "chart title: label". `gaps_crossed` names the timeline charts of GPU shares where a
// drawn segment spans part of a slot that CUPTI did not observe (no value in the page's
// data). `blocked_max` is the highest value the host-blocked chart draws (read back from
// its outline through the chart's scales), null without that chart; `threads` the threads
// of all processes.
// tests/views.rs runs this and judges the lines.
//
// Usage: node tools/browser/check.mjs [--loads N] FILE...   (CHROMIUM overrides the browser)
import puppeteer from "puppeteer-core";
import { pathToFileURL } from "node:url";
import path from "node:path";

const args = process.argv.slice(2);
let loads = 1;
if (args[0] === "--loads") {
  loads = Number(args[1]);
  args.splice(0, 2);
}
if (!args.length || !(loads >= 1)) {
  console.error("usage: node tools/browser/check.mjs [--loads N] FILE...");
  process.exit(2);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  // Root (CI) cannot use Chromium's sandbox.
  args: (process.getuid() === 0 ? ["--no-sandbox"] : []).concat(["--disable-dev-shm-usage"]),
});
try {
  for (const file of args) {
    const url = pathToFileURL(path.resolve(file)).href;
    for (let i = 0; i < loads; i++) {
      console.log(JSON.stringify(await load(url, file)));
    }
  }
} finally {
  await browser.close();
}

async function load(url, file) {
  const page = await browser.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  page.on("pageerror", (e) => errors.push("exception: " + e.message));
  await page.setRequestInterception(true);
  page.on("request", (r) => {
    if (r.url() === url) return r.continue();
    errors.push("request: " + r.url());
    r.abort();
  });
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(url, { waitUntil: "load", timeout: 60000 });
  const seen = await page.evaluate(() => {
    const nav = performance.getEntriesByType("navigation")[0];
    // A chart is drawn when it has a mark with extent: a path with a non-empty outline or
    // a rectangle with width (axes are lines, labels are text).
    const drawn = (svg) => [...svg.querySelectorAll("path, rect")].some((m) => {
      if (m.classList.contains("phase") || m.classList.contains("brush")) return false;
      const b = m.getBBox();
      return b.width > 0 || b.height > 0;
    });
    const painted = (c) => {
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return true;
      return false;
    };
    const charts = [...document.querySelectorAll("svg.chart")];
    const title = (c) => c.querySelector("text")?.textContent || "?";
    const labels_outside = [], labels_overlapping = [];
    for (const c of charts) {
      const w = c.viewBox.baseVal.width, hgt = c.viewBox.baseVal.height;
      const boxes = [...c.querySelectorAll("text")].map((t) => [t.textContent, t.getBBox()]);
      for (const [text, b] of boxes) {
        if (b.x < -0.5 || b.y < -0.5 || b.x + b.width > w + 0.5 || b.y + b.height > hgt + 0.5) labels_outside.push(`${title(c)}: ${text}`);
      }
      boxes.forEach(([text, a], i) => boxes.slice(i + 1).forEach(([other, b]) => {
        const apart = a.x + a.width <= b.x || b.x + b.width <= a.x || a.y + a.height <= b.y || b.y + b.height <= a.y;
        if (!apart) labels_overlapping.push(`${title(c)}: ${text} / ${other}`);
      }));
    }
    // Each path's segments as [x0, y0, x1, y1] (the commands view.js writes: M, L, H, Z).
    const segments = (path) => {
      const out = [];
      let x = 0, y = 0, sx = 0, sy = 0;
      for (const [, cmd, args] of path.getAttribute("d").matchAll(/([MLHZ])([^MLHZ]*)/g)) {
        const n = args.trim().split(/[ ,]+/).filter(Boolean).map(Number);
        const [nx, ny] = cmd === "M" || cmd === "L" ? n : cmd === "H" ? [n[0], y] : [sx, sy];
        if (cmd === "M") { sx = nx; sy = ny; } else out.push([x, y, nx, ny]);
        x = nx; y = ny;
      }
      return out;
    };
    const data = JSON.parse(document.getElementById("data").textContent).page;
    const timelines = data.timelines;
    const gaps_crossed = [];
    let blocked_max = null;
    for (const c of document.querySelectorAll("#timeline svg.chart[data-view]")) {
      const [from, to] = c.dataset.view.split(" ").map(Number), step = Number(c.dataset.step);
      const [x0, x1, base, topY] = c.dataset.plot.split(" ").map(Number), yMax = Number(c.dataset.yMax);
      const px = (t) => x0 + ((t - from) / (to - from)) * (x1 - x0);
      const paths = [...c.querySelectorAll("path")].flatMap(segments);
      if (title(c).startsWith("GPU busy")) {
        timelines.job.gpu_busy_share.forEach((v, i) => {
          if (v != null) return;
          const a = Math.max(px(i * step), x0) + 0.5, b = Math.min(px((i + 1) * step), x1) - 0.5;
          if (b > a && paths.some(([sx, , ex]) => Math.max(sx, ex) > a && Math.min(sx, ex) < b)) gaps_crossed.push(`${title(c)}: slot ${i}`);
        });
      }
      if (title(c).startsWith("Host blocked")) {
        const highest = Math.min(...paths.flatMap(([, sy, , ey]) => [sy, ey]));
        blocked_max = ((base - highest) / (base - topY)) * yMax;
      }
    }
    const canvases = [...document.querySelectorAll("canvas")];
    const verdict = document.getElementById("verdict");
    const gpu = document.getElementById("gpu");
    return {
      load_ms: nav.loadEventEnd - nav.startTime,
      verdict: verdict ? verdict.innerText.trim() : "",
      charts: charts.length,
      empty_charts: charts.filter((c) => !drawn(c)).map((c) => c.querySelector("text")?.textContent || "?"),
      canvases: canvases.length,
      empty_canvases: canvases.filter((c) => !painted(c)).length,
      gpu: gpu ? gpu.innerText : null,
      labels_outside,
      labels_overlapping,
      gaps_crossed,
      blocked_max,
      threads: (data.processes || []).reduce((sum, p) => sum + p.threads, 0),
    };
  });
  const zoom = await dragAndReset(page);
  await page.close();
  return { file, ...seen, zoom, errors };
}

async function dragAndReset(page) {
  const chart = await page.$("#timeline svg.chart");
  if (!chart) return null;
  await chart.scrollIntoView();
  const box = await chart.boundingBox();
  const state = () => page.$eval("#zoom-state", (e) => e.textContent);
  const before = await state();
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width * 0.3, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, y, { steps: 4 });
  await page.mouse.up();
  const zoomed = await state();
  await page.mouse.click(box.x + box.width * 0.5, y, { count: 2 });
  return { before, zoomed, reset: await state() };
}
