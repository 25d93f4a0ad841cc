use crate::support::*;
use gpuspy_format::prom::{render, render_finding, Identity};
use gpuspy_format::{parse_dump, Dump, Hang};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// promtool: on the PATH, or where `tools/ensure-deps.sh test` puts it.
fn promtool() -> PathBuf {
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/promtool");
    if local.is_file() {
        return local;
    }
    let on_path = Command::new("promtool").arg("--version").output();
    assert!(
        on_path.is_ok_and(|o| o.status.success()),
        "promtool is needed (run `tools/ensure-deps.sh test`)"
    );
    PathBuf::from("promtool")
}

/// `promtool check metrics` on `text`: its complaints, empty when it passes.
fn promtool_check(text: &str) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    promtool_check_file(file.path())
}

/// `promtool check metrics` on the file at `path`, read from disk rather than memory.
fn promtool_check_file(path: &Path) -> String {
    let out = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(path).unwrap())
        .output()
        .unwrap();
    let complaints = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.success(),
        complaints.trim().is_empty(),
        "{complaints}"
    );
    complaints
}

/// Polls `found` every 10 ms until it gives a value or `limit` passes.
fn wait_for<T>(limit: Duration, mut found: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(v) = found() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// The first dump in `dir` that records a hang, and its path.
fn hung_dump(dir: &Path) -> Option<(PathBuf, Dump)> {
    dumps_in(dir).into_iter().find_map(|p| {
        let d = parse_dump(&std::fs::read_to_string(&p).ok()?).ok()?;
        (!d.hangs.is_empty()).then_some((p, d))
    })
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_sync_stuck_past_the_threshold_is_flushed_with_the_call_in_flight() {
    let out = tempfile::tempdir().unwrap();
    let mut child = command(
        &program("timed"),
        &["1"],
        &[
            ("FAKECUDA_DELAY_NS", "cuStreamSynchronize=3000000000"),
            ("GPUSPY_HANG_S", "1"),
            ("GPUSPY_FLUSH_S", "0"),
        ],
        out.path(),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // The dump is flushed while the call is still in flight (the sync blocks 3 s).
    let found = wait_for(Duration::from_secs(30), || hung_dump(out.path()));
    let still_running = child.try_wait().unwrap().is_none();
    let (path, dump) = found.expect("no dump with the hung call");
    let kept = out.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    std::fs::copy(&path, kept.join(path.file_name().unwrap())).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(
        still_running,
        "the hang was flushed only after the call returned"
    );
    assert_eq!(dump.hangs.len(), 1);
    let h = &dump.hangs[0];
    assert_eq!(h.api, "cuStreamSynchronize");
    assert!(h.thread > 0 && h.communicator.is_none());
    // Found within 2 s of the call's start: at 1 s, plus at most a quarter of it.
    assert!(
        (1_000_000_000..2_000_000_000).contains(&h.elapsed_ns),
        "{}",
        h.elapsed_ns
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = format!("thread {} in cuStreamSynchronize for", h.thread);
    assert_eq!(stderr.matches("gpuspy: hang:").count(), 1, "{stderr}");
    assert!(stderr.contains(&line), "{stderr}");
    // The dump written at exit, after the call returned, has no hang.
    let last = parse_dump(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(last.complete && last.hangs.is_empty());

    let report = report_json(&[&kept]);
    let hangs = report["hangs"].as_array().unwrap();
    assert_eq!(hangs.len(), 1);
    assert_eq!(hangs[0]["api"], "cuStreamSynchronize");
    assert_eq!(hangs[0]["pid"], child_pid(&dump));
    assert_eq!(hangs[0]["rank"], Value::Null);
    assert_eq!(hangs[0]["elapsed_ns"], h.elapsed_ns);
    let text = report_text(&kept);
    assert!(text.contains("HANG: 1 call(s) in flight"), "{text}");
    assert!(text.contains(&line), "{text}");
}

fn child_pid(dump: &Dump) -> u32 {
    dump.process.pid
}

fn rank_command(rank: u32, rendezvous: &Path, out: &Path, prom: &Path) -> Command {
    let rank_s = rank.to_string();
    let mut cmd = command(
        &program("nccl_hang"),
        &[&rank_s, "3"],
        &[
            ("RANK", &rank_s),
            ("WORLD_SIZE", "2"),
            ("FAKENCCL_RENDEZVOUS", s(rendezvous)),
            ("GPUSPY_HANG_S", "1"),
            ("GPUSPY_FLUSH_S", "0.2"),
            ("GPUSPY_PROM_DIR", s(prom)),
        ],
        out,
    );
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    cmd
}

#[test]
fn the_rank_that_never_entered_the_all_reduce_is_named() {
    let (rendezvous, out, prom) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let mut ranks: Vec<Child> = (0..2)
        .map(|r| {
            rank_command(r, rendezvous.path(), out.path(), prom.path())
                .spawn()
                .unwrap()
        })
        .collect();
    let found = wait_for(Duration::from_secs(30), || hung_dump(out.path()));
    // While rank 0 hangs, its metrics say so and pass promtool.
    let host = found
        .as_ref()
        .map(|(_, d)| d.process.host.clone())
        .unwrap_or_default();
    let rank0_prom = prom.path().join(format!("gpuspy-r0-{host}.prom"));
    let metrics = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&rank0_prom)
            .ok()
            .filter(|m| m.contains(",rank=\"0\"} 1\n") && m.contains("gpuspy_hung_calls{"))
    })
    .unwrap_or_default();
    let rank1_done = ranks[1].wait().unwrap();
    // Rank 1 exits after its sleep: its last flush has its count; its metrics file goes.
    kill(&mut ranks[0]);
    let (_, dump) = found.expect("rank 0 never flushed its hang");
    assert!(rank1_done.success());
    assert_eq!(dump.process.rank.as_ref().map(|r| r.rank), Some(0));
    let h = &dump.hangs[0];
    assert_eq!((h.api.as_str(), h.sequence), ("ncclAllReduce", Some(3)));
    let key = dump.nccl.as_ref().unwrap().communicators[0].key.clone();
    assert_eq!(h.communicator.as_deref(), Some(key.as_str()));
    assert!(metrics.contains("gpuspy_hung_calls{host="), "{metrics}");
    assert!(metrics.contains(",rank=\"0\"} 1\n"), "{metrics}");
    assert_eq!(promtool_check(&metrics), "");
    assert!(!prom.path().join(format!("gpuspy-r1-{host}.prom")).exists());

    let report = report_json(&[out.path()]);
    let hangs = report["hangs"].as_array().unwrap();
    assert_eq!(hangs.len(), 1);
    assert_eq!(
        (&hangs[0]["rank"], &hangs[0]["api"], &hangs[0]["sequence"]),
        (
            &Value::from(0),
            &Value::from("ncclAllReduce"),
            &Value::from(3)
        )
    );
    let waits = report["hang_waits"].as_array().unwrap();
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0]["collective"], "AllReduce");
    assert_eq!(waits[0]["sequence"], 3);
    assert_eq!(waits[0]["waiting"], serde_json::json!(["rank 0"]));
    assert_eq!(waits[0]["behind"], serde_json::json!([["rank 1", 3]]));
    let text = report_text(out.path());
    assert!(
        text.contains("rank 0 issued AllReduce (operation 3) and wait in it; rank 1 (issued 3) never entered it: the suspect"),
        "{text}"
    );
}

/// A rank dump with everything the metrics cover: the H200 DDP run's rank 0 (NVML, CUPTI,
/// NCCL), with a hung call.
fn rich_dump() -> Dump {
    let path = data("h200-ddp-slow").join("gpuspy-r0-vm-755.json");
    let mut d = parse_dump(&std::fs::read_to_string(path).unwrap()).unwrap();
    d.hangs.push(Hang {
        api: "cuStreamSynchronize".into(),
        thread: 755,
        since_unix_ns: d.stop_unix_ns - 6_000_000_000,
        elapsed_ns: 6_000_000_000,
        communicator: None,
        sequence: None,
    });
    d
}

/// The series of an exposition: each sample line without its value.
fn series(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
        .collect()
}

/// Serves files as node_exporter does: each family's HELP and TYPE once, its samples from
/// every file after them. Each family's samples go through a file of their own, so that
/// 1,000 ranks' text is never in this process's memory (the RSS of the children other
/// tests measure starts from it).
struct Merger {
    dir: tempfile::TempDir,
    /// Family name, its header, and the file of its samples, in order of appearance.
    families: Vec<(String, String, std::io::BufWriter<std::fs::File>)>,
}

impl Merger {
    fn new() -> Merger {
        Merger {
            dir: tempfile::tempdir().unwrap(),
            families: Vec::new(),
        }
    }

    fn add(&mut self, text: &str) {
        use std::io::Write;
        let mut current = 0;
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                let kind = lines.next().unwrap();
                current = match self.families.iter().position(|f| f.0 == name) {
                    Some(i) => i,
                    None => {
                        let file = std::fs::File::create(
                            self.dir.path().join(self.families.len().to_string()),
                        )
                        .unwrap();
                        self.families.push((
                            name.to_string(),
                            format!("{line}\n{kind}\n"),
                            std::io::BufWriter::new(file),
                        ));
                        self.families.len() - 1
                    }
                };
            } else {
                writeln!(self.families[current].2, "{line}").unwrap();
            }
        }
    }

    /// The merged exposition, as a file.
    fn finish(self) -> (tempfile::TempDir, PathBuf) {
        use std::io::Write;
        let path = self.dir.path().join("merged.prom");
        let mut merged = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for (i, (_, header, samples)) in self.families.into_iter().enumerate() {
            drop(samples.into_inner().unwrap());
            merged.write_all(header.as_bytes()).unwrap();
            let mut part = std::fs::File::open(self.dir.path().join(i.to_string())).unwrap();
            std::io::copy(&mut part, &mut merged).unwrap();
        }
        merged.flush().unwrap();
        (self.dir, path)
    }
}

#[test]
fn a_thousand_ranks_files_never_share_a_series_and_pass_promtool() {
    use std::hash::{BuildHasher, RandomState};
    let d = rich_dump();
    let hasher = RandomState::new();
    let (mut names, mut seen) = (BTreeSet::new(), std::collections::HashSet::new());
    let mut merger = Merger::new();
    for rank in 0..1000 {
        let identity = Identity {
            host: format!("node{}", rank / 8),
            rank: Some(rank),
            job: Some("4242".into()),
            pid: 755,
        };
        assert!(names.insert(identity.file_name()));
        let text = render(&d, &identity);
        let mine = series(&text);
        if rank == 0 {
            // Histograms per API family: bounded, and no kernel name anywhere.
            assert!(mine.len() < 1_000, "{}", mine.len());
            assert!(!text.contains("Kernel<") && !text.contains("ncclDevKernel"));
            assert_eq!(promtool_check(&text), "");
        }
        for s in mine {
            assert!(seen.insert(hasher.hash_one(&s)), "two files carry {s}");
        }
        merger.add(&text);
    }
    let (_dir, merged) = merger.finish();
    assert_eq!(promtool_check_file(&merged), "");
}

#[test]
fn every_metric_the_dashboard_queries_is_in_a_generated_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("docs/grafana/gpuspy.json")).unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    fn collect(v: &Value, into: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, v)| match (k.as_str(), v) {
                ("expr", Value::String(e)) => into.push(e.clone()),
                _ => collect(v, into),
            }),
            Value::Array(a) => a.iter().for_each(|v| collect(v, into)),
            _ => {}
        }
    }
    collect(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "{exprs:?}");
    let identity = Identity::of(&rich_dump(), false);
    let text =
        render(&rich_dump(), &identity) + &render_finding(&identity, Some(("input-starved", 0.52)));
    assert_eq!(promtool_check(&text), "");
    let present: BTreeSet<String> = series(&text)
        .iter()
        .map(|s| s.split('{').next().unwrap().to_string())
        .collect();
    for expr in &exprs {
        let mut rest = expr.as_str();
        while let Some(at) = rest.find("gpuspy_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                present.contains(&name),
                "the dashboard queries {name}, which no file has"
            );
            rest = &rest[at + name.len()..];
        }
    }
}

#[test]
fn run_with_prom_keeps_the_first_finding_and_each_process_file_while_the_job_runs() {
    let (out, prom) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut job = Command::new(gpuspy())
        .args(["run", "--prom", s(prom.path()), "-o", s(out.path()), "--"])
        // A run blocked in syncs (tests/diagnosis.rs): 600 steps of 4.8 ms or more.
        .arg(program("simulated_step"))
        .arg("600")
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env(
            "FAKECUDA_DELAY_NS",
            "cuStreamSynchronize=4000000,cuLaunchKernel=20000",
        )
        .env("GPUSPY_FLUSH_S", "0.2")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let files = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(prom.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".prom"))
            .collect();
        names.sort();
        names
    };
    let finding = wait_for(Duration::from_secs(30), || {
        let name = files().into_iter().find(|n| n.starts_with("gpuspy-run-"))?;
        std::fs::read_to_string(prom.path().join(name))
            .ok()
            .filter(|t| t.contains("finding=\""))
    });
    let during = files();
    assert!(job.wait().unwrap().success());
    let finding = finding.expect("no finding file while the job ran");
    assert_eq!(promtool_check(&finding), "");
    assert!(
        finding.contains("gpuspy_finding_impact_ratio{host=\""),
        "{finding}"
    );
    // The job's own process wrote its file (named by pid: no rank) beside the CLI's.
    assert!(
        during.iter().any(|n| n.starts_with("gpuspy-p")),
        "{during:?}"
    );
    // Neither outlives the job.
    assert_eq!(files(), Vec::<String>::new());
}
