//! `gpuspy report --json`: exactly one JSON object. Schema: docs/report-json.md.

use crate::collectives::{collectives, link_peak};
use crate::diagnose::Diagnosis;
use crate::profile::{Latency, Profile};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

/// The report. Its long lists, the per-API rows and the names looked up, are written
/// straight from the profile: as `Value`s they cost many times their size, and a hostile
/// dump can make them as long as it likes.
#[derive(Serialize)]
pub struct Report<'a> {
    #[serde(flatten)]
    summary: Value,
    apis: ApiRows<'a>,
    unwrapped_symbols: &'a [String],
}

struct ApiRows<'a>(&'a Profile);

impl Serialize for ApiRows<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.by_total_time().into_iter().map(|(name, api)| {
            ApiRow {
                api: name,
                latency: LatencyRow::of(&api.latency),
                errors: api.errors(),
                nested: api.nested,
                bytes: api.bytes,
                results: api
                    .results
                    .iter()
                    .map(|(&code, &count)| ResultRow { code, count })
                    .collect(),
                symbols: api
                    .symbols
                    .iter()
                    .map(|(symbol, count)| SymbolRow {
                        symbol,
                        count: *count,
                    })
                    .collect(),
            }
        }))
    }
}

#[derive(Serialize)]
struct ApiRow<'a> {
    api: &'a str,
    #[serde(flatten)]
    latency: LatencyRow,
    errors: u64,
    nested: u64,
    bytes: u64,
    results: Vec<ResultRow>,
    symbols: Vec<SymbolRow<'a>>,
}

#[derive(Serialize)]
struct ResultRow {
    code: u32,
    count: u64,
}

#[derive(Serialize)]
struct SymbolRow<'a> {
    symbol: &'a str,
    count: u64,
}

#[derive(Serialize)]
struct LatencyRow {
    count: u64,
    total_ns: u64,
    p50_ns: u64,
    p90_ns: u64,
    p99_ns: u64,
    max_ns: u64,
}

impl LatencyRow {
    fn of(l: &Latency) -> LatencyRow {
        LatencyRow {
            count: l.calls,
            total_ns: l.total_ns,
            p50_ns: l.quantile(0.50),
            p90_ns: l.quantile(0.90),
            p99_ns: l.quantile(0.99),
            max_ns: l.max_ns,
        }
    }
}

pub fn render<'a>(p: &'a Profile, d: &Diagnosis) -> Report<'a> {
    let syncs: Vec<Value> = p
        .syncs
        .iter()
        .map(|(cause, l)| {
            let mut row = json!(LatencyRow::of(l));
            row["cause"] = json!(cause);
            row
        })
        .collect();
    let copies: Vec<Value> = p
        .copies
        .iter()
        .map(|((dir, host), (calls, bytes))| {
            json!({"direction": dir, "host": host, "count": calls, "bytes": bytes})
        })
        .collect();
    let processes: Vec<Value> = p
        .processes
        .iter()
        .map(|pr| {
            json!({
                "path": pr.path, "pid": pr.pid, "host": pr.host, "exe": pr.exe,
                "cmdline": pr.cmdline, "wall_ns": pr.wall_ns, "driver_ns": pr.driver_ns,
                "calls": pr.calls, "threads": pr.threads, "complete": pr.complete,
                "ended_by": pr.ended_by, "images": pr.images,
                "rank": pr.rank, "steady_ns": pr.steady_ns, "blocked_ns": pr.blocked_ns,
                "wait_share": pr.wait_share(), "nccl_kernel_ns": pr.nccl_kernel_ns(),
                "launches": pr.launches,
                "verdict": pr.verdict,
            })
        })
        .collect();
    let gpu: Vec<Value> = p
        .processes
        .iter()
        .filter_map(|pr| {
            let g = pr.gpu.as_deref()?;
            let mut v = json!(g);
            v["pid"] = json!(pr.pid);
            v["rank"] = json!(pr.rank);
            if let Some(devices) = v["devices"].as_array_mut() {
                for (dv, d) in devices.iter_mut().zip(&g.devices) {
                    if let Some(a) = &d.activity {
                        dv["activity"]["busy_share"] = json!(a.busy_share());
                    }
                }
            }
            Some(v)
        })
        .collect();
    let summary = json!({
        "processes": processes,
        "gpu": gpu,
        "wall_ns": p.span_ns(),
        "process_wall_ns": p.process_wall_ns(),
        "driver_ns": p.driver_ns(),
        "saturated": p.saturated,
        "syncs": syncs,
        "copies": copies,
        "nccl": {
            "ops": p.nccl_ops.iter().map(|((op, dt), (calls, bytes))| {
                json!({"op": op, "datatype": dt, "calls": calls, "bytes": bytes})
            }).collect::<Vec<_>>(),
            "collectives": collectives(p).iter().map(|c| json!({
                "op": c.op, "kernels": c.kernels, "kernel_ns": c.kernel_ns,
                "least_rank_kernel_ns": c.least_rank_kernel_ns, "bytes": c.bytes,
                "ranks": c.ranks, "algbw_bytes_per_s": c.algbw, "busbw_bytes_per_s": c.busbw,
                "saturated": c.saturated,
            })).collect::<Vec<_>>(),
            "link_peak": link_peak(p).map(|(bytes_per_s, link)| json!({"link": link, "bytes_per_s": bytes_per_s})),
            "communicators": p.communicators.iter().map(|(key, c)| {
                let disagreement = c.disagreement().map(|(common, odd)| json!({
                    "common_operations": common,
                    "members": odd.iter().map(|(m, n)| json!({"member": m, "operations": n})).collect::<Vec<_>>(),
                }));
                json!({"key": key, "operations": c.operations(), "bytes": c.bytes,
                       "members_seen": c.members.len(), "disagreement": disagreement})
            }).collect::<Vec<_>>(),
        },
        "rank_imbalance": p.rank_imbalance(),
        "rank_verdicts": {
            "common": p.rank_verdicts().0,
            "differ": p.rank_verdicts().1.iter().map(|(rank, v)| json!({"rank": rank, "verdict": v})).collect::<Vec<_>>(),
        },
        "active_ns": p.active_ns(),
        "steady_ns": p.steady_ns(),
        "verdict": d.verdict().map(|f| f.id),
        "gpu_busy_share": p.gpu_idle_share().map(|idle| 1.0 - idle),
        "findings": d.findings,
        "layers": d.layers,
    });
    Report {
        summary,
        apis: ApiRows(p),
        unwrapped_symbols: &p.unwrapped,
    }
}
