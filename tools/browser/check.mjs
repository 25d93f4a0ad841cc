// Loads gpuspy HTML pages in the system's headless Chromium (Debian package `chromium`,
// driven by puppeteer-core, which downloads no browser) and prints one JSON line per load:
//   {"file", "load_ms", "verdict", "charts", "empty_charts", "canvases", "empty_canvases",
//    "zoom", "errors": [...]}
// `load_ms` is from navigation start to the end of the load event (the page's own
// performance timing; the browser's start is not in it). `errors` holds console errors,
// uncaught exceptions and any request that is not the file itself (the page must need no
// network). `zoom` is null without a timeline, else the timeline's "showing A to B" line
// before a drag across its first chart, after it, and after a double click there.
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
