//! `gpuspy report --perfetto FILE`: the report's time axis as Chrome trace-event JSON (the
//! JSON object format), which the Perfetto UI and `chrome://tracing` open.
//!
//! One group of tracks (a trace "process") for the job and one per process of the job,
//! ordered by rank: counter tracks for the window series and the NVML telemetry, and
//! slices for the sampled blocking calls and GPU idle gaps. Times are microseconds from
//! the start of the job's grid, `otherData.origin_unix_ns`; a run against the fake driver
//! has `otherData.simulated` and a job group named `SIMULATED job (...)`. Bounded by the
//! report's own bounds (src/analysis/timelines.rs): a 1,000-rank job of any length stays
//! under 10 MB; a counter is written only when its value changes.

use crate::analysis::report::{ProcessRow, Report};
use crate::analysis::timelines::{Grid, Series, Timelines};
use gpuspy_format::timeline::HostEventKind;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::io::Write;

/// One trace event. `ts` and `dur` are microseconds.
#[derive(Serialize)]
struct Event<'a> {
    ph: &'static str,
    name: &'a str,
    pid: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    args: Value,
}

struct Trace<W: Write> {
    out: W,
    origin: u64,
    first: bool,
}

impl<W: Write> Trace<W> {
    fn event(&mut self, e: &Event) -> anyhow::Result<()> {
        self.out
            .write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        serde_json::to_writer(&mut self.out, e)?;
        Ok(())
    }

    /// Microseconds from the origin.
    fn us(&self, unix_ns: u64) -> f64 {
        unix_ns.saturating_sub(self.origin) as f64 / 1e3
    }

    fn metadata(
        &mut self,
        pid: usize,
        tid: Option<usize>,
        name: &str,
        args: Value,
    ) -> anyhow::Result<()> {
        self.event(&Event {
            ph: "M",
            name,
            pid,
            tid,
            ts: None,
            dur: None,
            cat: None,
            args,
        })
    }

    /// A counter track: one event per slot whose values differ from the last written,
    /// and a last one at the grid's end; slots where a value is unknown are skipped.
    fn counter(
        &mut self,
        pid: usize,
        name: &str,
        grid: &Grid,
        values: &[Map<String, Value>],
    ) -> anyhow::Result<()> {
        let mut last: Option<&Map<String, Value>> = None;
        for (i, v) in values.iter().enumerate() {
            if v.is_empty() || last == Some(v) {
                continue;
            }
            last = Some(v);
            let ts = self.us(grid.start_unix_ns + i as u64 * grid.step_ns);
            self.counter_event(pid, name, ts, Value::Object(v.clone()))?;
        }
        if let Some(v) = last {
            let zeros = v.keys().map(|k| (k.clone(), json!(0))).collect();
            let end = self.us(grid.start_unix_ns + grid.slots as u64 * grid.step_ns);
            self.counter_event(pid, name, end, Value::Object(zeros))?;
        }
        Ok(())
    }

    fn counter_event(
        &mut self,
        pid: usize,
        name: &str,
        ts: f64,
        args: Value,
    ) -> anyhow::Result<()> {
        self.event(&Event {
            ph: "C",
            name,
            pid,
            tid: None,
            ts: Some(ts),
            dur: None,
            cat: None,
            args,
        })
    }

    /// Slices on tracks named `track`, `track 2`, ...: each slice on the first track where
    /// it does not overlap the one before (trace viewers need a track's slices nested).
    fn slices(
        &mut self,
        pid: usize,
        first_tid: usize,
        track: &str,
        slices: impl Iterator<Item = (String, u64, u64)>,
    ) -> anyhow::Result<usize> {
        let mut lane_ends: Vec<u64> = Vec::new();
        for (name, start, end) in slices {
            let lane = match lane_ends.iter().position(|&e| e <= start) {
                Some(l) => l,
                None => {
                    lane_ends.push(0);
                    let n = lane_ends.len();
                    let label = if n == 1 {
                        track.to_string()
                    } else {
                        format!("{track} {n}")
                    };
                    self.metadata(
                        pid,
                        Some(first_tid + n - 1),
                        "thread_name",
                        json!({ "name": label }),
                    )?;
                    n - 1
                }
            };
            lane_ends[lane] = end;
            self.event(&Event {
                ph: "X",
                name: &name,
                pid,
                tid: Some(first_tid + lane),
                ts: Some(self.us(start)),
                dur: Some(end.saturating_sub(start) as f64 / 1e3),
                cat: Some("gpuspy"),
                args: json!({}),
            })?;
        }
        Ok(lane_ends.len())
    }

    /// The window series of one group.
    fn series(&mut self, pid: usize, grid: &Grid, s: &Series) -> anyhow::Result<()> {
        let one = |v: f64| Map::from_iter([("value".to_string(), json!(v))]);
        self.counter(
            pid,
            "launches/s",
            grid,
            &s.launches_per_s.iter().map(|&v| one(v)).collect::<Vec<_>>(),
        )?;
        let gpu: Vec<Map<String, Value>> = (0..grid.slots)
            .map(|i| {
                let mut m = Map::new();
                if let Some(b) = s.gpu_busy_share[i] {
                    m.insert("busy".into(), json!(b));
                    for c in &s.gpu_idle {
                        m.insert(
                            format!("idle {}", name(&c.cause)),
                            json!(c.values[i].unwrap_or(0.0)),
                        );
                    }
                }
                m
            })
            .collect();
        self.counter(pid, "GPU busy and idle (share)", grid, &gpu)?;
        let blocked: Vec<Map<String, Value>> = (0..grid.slots)
            .map(|i| {
                s.blocked
                    .iter()
                    .map(|c| (name(&c.cause), json!(c.values[i])))
                    .collect()
            })
            .collect();
        self.counter(pid, "host blocked (threads)", grid, &blocked)?;
        Ok(())
    }

    fn telemetry(
        &mut self,
        pid: usize,
        label: &str,
        grid: &Grid,
        series: [&[Option<f64>]; 4],
    ) -> anyhow::Result<()> {
        for (quantity, values) in ["util %", "SM clock MHz", "power W", "temp C"]
            .iter()
            .zip(series)
        {
            let maps: Vec<Map<String, Value>> = values
                .iter()
                .map(|v| {
                    v.map(|v| Map::from_iter([("value".to_string(), json!(v))]))
                        .unwrap_or_default()
                })
                .collect();
            self.counter(pid, &format!("{label} {quantity}"), grid, &maps)?;
        }
        Ok(())
    }
}

/// A cause's name as the dump and the report spell it (`after-sync`).
fn name(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn process_label(p: &ProcessRow) -> String {
    match p.rank {
        Some(rank) => format!("rank {rank} (pid {} on {})", p.pid, p.host),
        None => format!("pid {} on {} ({})", p.pid, p.host, p.exe),
    }
}

/// Writes the trace; an error when the report has no time axis.
pub fn write(r: &Report, out: impl Write) -> anyhow::Result<()> {
    let Some(t) = &r.timelines else {
        anyhow::bail!("no time axis in these dumps (no timeline, CUPTI busy series or NVML series): nothing to put in a trace");
    };
    let mut trace = Trace {
        out,
        origin: t.grid.start_unix_ns,
        first: true,
    };
    write!(
        trace.out,
        "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"tool\":\"gpuspy\",\"origin_unix_ns\":\"{}\"{}}},\"traceEvents\":[",
        t.grid.start_unix_ns,
        if r.simulated { ",\"simulated\":true" } else { "" }
    )?;
    events(&mut trace, r, t)?;
    trace.out.write_all(b"\n]}\n")?;
    trace.out.flush()?;
    Ok(())
}

fn events<W: Write>(trace: &mut Trace<W>, r: &Report, t: &Timelines) -> anyhow::Result<()> {
    // Group 0 is the job; the processes follow, ranks in order.
    // The job's track group is the first a viewer shows: a simulated run says so there.
    let simulated = if r.simulated { "SIMULATED " } else { "" };
    trace.metadata(
        0,
        None,
        "process_name",
        json!({ "name": format!("{simulated}job ({} processes)", r.processes.len()) }),
    )?;
    trace.metadata(0, None, "process_sort_index", json!({ "sort_index": 0 }))?;
    trace.series(0, &t.grid, &t.job)?;
    let phases = r.phases.iter().map(|ph| {
        (
            ph.name
                .clone()
                .unwrap_or_else(|| ph.kind.name().to_string()),
            r.start_unix_ns + ph.start_ns,
            r.start_unix_ns + ph.end_ns,
        )
    });
    trace.slices(0, 1, "phases", phases)?;
    trace.telemetry(
        0,
        "NVML mean",
        &t.grid,
        [
            &t.job.gpu_util_pct,
            &t.job.sm_clock_mhz,
            &t.job.power_w,
            &t.job.gpu_temp_c,
        ],
    )?;
    let mut order: Vec<usize> = (0..t.processes.len()).collect();
    order.sort_by_key(|&i| (t.processes[i].rank.is_none(), t.processes[i].rank, i));
    for (sort, i) in order.into_iter().enumerate() {
        let (p, row) = (&t.processes[i], &r.processes[i]);
        let pid = i + 1;
        trace.metadata(
            pid,
            None,
            "process_name",
            json!({ "name": process_label(row) }),
        )?;
        trace.metadata(
            pid,
            None,
            "process_sort_index",
            json!({ "sort_index": sort + 1 }),
        )?;
        trace.series(pid, &t.process_grid, &p.series)?;
        for d in &p.devices {
            let label = format!("GPU {}", d.ordinal);
            trace.telemetry(
                pid,
                &label,
                &t.process_grid,
                [&d.gpu_util_pct, &d.sm_clock_mhz, &d.power_w, &d.gpu_temp_c],
            )?;
        }
        let blocking = p.blocking.iter().map(|e| {
            let what = match e.kind {
                HostEventKind::Sync(c) => format!("sync: {}", c.name()),
                HostEventKind::Alloc => "alloc/free".to_string(),
                HostEventKind::Collective => "collective".to_string(),
            };
            (what, e.start_unix_ns, e.end_unix_ns)
        });
        let phases = row.phases.iter().map(|ph| {
            (
                ph.name
                    .clone()
                    .unwrap_or_else(|| ph.kind.name().to_string()),
                r.start_unix_ns + ph.start_ns,
                r.start_unix_ns + ph.end_ns,
            )
        });
        let mut tid = 1 + trace.slices(pid, 1, "phases", phases)?;
        tid += trace.slices(pid, tid, "host blocking calls (sampled)", blocking)?;
        let mut ordinals: Vec<u32> = p.idle_gaps.iter().map(|g| g.ordinal).collect();
        ordinals.dedup();
        for o in ordinals {
            let gaps = p.idle_gaps.iter().filter(|g| g.ordinal == o).map(|g| {
                (
                    format!("idle: {}", name(&g.gap.cause)),
                    g.gap.start_unix_ns,
                    g.gap.end_unix_ns,
                )
            });
            tid += trace.slices(pid, tid, &format!("GPU {o} idle gaps (sampled)"), gaps)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_slices_go_to_further_tracks_and_nest_on_each() {
        let mut out = Vec::new();
        let mut t = Trace {
            out: &mut out,
            origin: 1_000,
            first: true,
        };
        let slices = [
            ("a", 1_000, 5_000),
            ("b", 2_000, 3_000),
            ("c", 5_000, 6_000),
        ];
        let lanes = t
            .slices(
                1,
                1,
                "track",
                slices.iter().map(|&(n, s, e)| (n.to_string(), s, e)),
            )
            .unwrap();
        assert_eq!(lanes, 2);
        let text = String::from_utf8(out).unwrap();
        let events: Vec<Value> = serde_json::from_str(&format!("[{}]", text.trim_start())).unwrap();
        let x: Vec<(String, u64, f64)> = events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["tid"].as_u64().unwrap(),
                    e["ts"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            x,
            [
                ("a".into(), 1, 0.0),
                ("b".into(), 2, 1.0),
                ("c".into(), 1, 4.0)
            ]
        );
    }
}
