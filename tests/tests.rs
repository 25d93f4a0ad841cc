//! Integration tests: real programs under libgpuspy.so against the fake libcuda.so.1 in
//! tools/fakecuda, asserting exact counts from `gpuspy report --json`.

// Shared with the timing binary (tests/timing.rs); each uses part of it.
#[allow(dead_code)]
mod support;

/// Impacts in [0, 1] and shares of at most 100 % on every recorded and fuzzed dump.
mod bounds;
/// Python call sites of blocking calls, through ctypes, on every interpreter here.
mod callsites;
/// The CLI on bad input, `gpuspy run`, and checked-in dumps.
mod cli;
/// `gpuspy demo`: every rule has data, every view says SIMULATED.
mod demo;
/// The verdict on simulated runs with a known problem.
mod diagnosis;
/// One program per door, each asserting exact per-API counts.
mod doors;
/// One figure per quantity across text, JSON, the HTML page and `check`.
mod figures;
/// Prometheus textfiles and the hang watchdog.
mod fleet;
/// `gpuspy diff` and `gpuspy check` as CI gates.
mod gates;
/// `gpuspy report` of every recorded dump, byte for byte as in tests/golden/.
mod golden;
/// GPU-side data: what a dump says without NVML and CUPTI, and dumps from the H200.
mod gpu;
/// The program and its data survive file-size limits, exec, thousands of threads, signals,
/// chdir, secrets in the command line and output directories others control.
mod hardening;
/// The CLI's own documentation: help with examples, shell completions, manual pages.
mod help;
/// Runs with calls the shim did not record: every view says the data is incomplete.
mod incomplete;
/// The import-cycle check of tools/check-layers.py, on the CLI, the format crate and the shim.
mod layers;
/// Fork, `_exit`, SIGKILL after a flush, processes that never call the driver.
mod lifecycle;
/// Merging crafted dumps: each once, a process's images as one, the job's span,
/// saturating counts, redacted secrets, dumps planted by another user.
mod merging;
/// What the CLI says to newcomers' mistakes: a disabled shim, a misspelt rule, a report
/// JSON where a dump was expected.
mod messages;
/// NVTX ranges through the shim as injection library: counts, named pauses, other tools.
mod nvtx;
/// Phases, the steady state and the cause of GPU idle time, on crafted schema-2 dumps.
mod phases;
/// Distributed jobs: rank naming, stragglers, scale.
mod ranks;
/// Copies, implicit syncs, errors and latency buckets.
mod recording;
/// `gpuspy run` itself: the preload path, signals, shared and unusable dump directories.
mod run;
/// The time axis of a dump: host windows that sum to the totals, blocking events, calls in
/// progress at a signal.
mod timeline;
/// What a program's environment controls: numbers no period has in `GPUSPY_*` variables,
/// host names that are no file name, secrets in any form of the command line.
mod untrusted_input;
/// The HTML pages in headless Chromium, and the Perfetto traces.
mod views;
/// The pip wheel's contract: the glibc needs of what it ships within its manylinux tag, the
/// installed layout's shim lookup and demo, `--version`.
mod wheel;
