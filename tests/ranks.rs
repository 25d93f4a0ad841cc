use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// One simulated rank (examples/simulated_step.c, 100 steps of a 4 KiB batch copied in, 40
/// launches and one sync): `launch_ns` of host work per launch, `sync_ns` waiting per step.
fn rank(dir: &Path, rank: u32, launch_ns: u64, sync_ns: u64) {
    let delay = format!("cuLaunchKernel={launch_ns},cuStreamSynchronize={sync_ns}");
    let rank_s = rank.to_string();
    let status = command(
        &program("simulated_step"),
        &["100", "4096"],
        &[
            ("FAKECUDA_DELAY_NS", delay.as_str()),
            ("RANK", rank_s.as_str()),
            ("LOCAL_RANK", rank_s.as_str()),
            ("WORLD_SIZE", "4"),
            ("SLURM_PROCID", "0"),
        ],
        dir,
    )
    .stdout(std::process::Stdio::null())
    .status()
    .unwrap();
    assert!(status.success());
}

/// The staging below keeps every judgement it asserts far from its rule's threshold, so a
/// loaded machine cannot flip it: the fake driver's delays are minimums, a sleep overshoots
/// by up to milliseconds under load and a spinning call is stretched when its thread is
/// preempted. (An earlier staging, 50 us launches and a 100 us sync on the straggler, put it
/// at about 12,000 launches a second against launch-bound's 10,000: on a loaded 2-core
/// machine it fell under, rank 1 came out sync-stalled like the others, and the test failed
/// in 4 runs of 10.)
/// - The straggler launches 4,000 kernels at 2 us of host time each and never waits: up to
///   500,000 launches a second, 50 times launch-bound's threshold (about 100,000 measured
///   on a loaded 2-core machine, where its spins are stretched), and it blocks about 0 % of
///   its time. It is launch-bound, and waits least, on any machine. Its batch is small so
///   that its short run is not `h2d-bound` too (4 MiB a step in its 10 ms would be).
/// - A waiting rank launches at no injected cost and sleeps 5 ms a step. Its few
///   milliseconds of host work a run (start-up, exit) are 1-2 % of its time, so ranks
///   staged alike stay within a few points of each other, far from the straggler rule's 10
///   points. Its sync stall is judged as held by the GPU: `sync-stalled` below the warning
///   level, or just over it on a slow run, which `rank_verdicts` does not count as a
///   difference.
const STRAGGLER: (u64, u64) = (2_000, 0);
const WAITING: (u64, u64) = (0, 5_000_000);

fn straggler(r: &Value) -> Option<&Value> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "rank-straggler")
}

/// `(rank, verdict, wait_share)` of each process of a report, by rank.
fn per_rank(r: &Value) -> Vec<(u64, String, f64)> {
    let mut v: Vec<(u64, String, f64)> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["rank"].as_u64().unwrap(),
                p["verdict"].as_str().unwrap_or("none").to_string(),
                p["blocked_ns"].as_f64().unwrap() / p["steady_ns"].as_f64().unwrap(),
            )
        })
        .collect();
    v.sort_by_key(|p| p.0);
    v
}

#[test]
fn the_slow_rank_is_named_and_an_even_job_names_none() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 1 keeps launching while the others wait at every step's sync.
    for r in 0..4 {
        let (launch, sync) = if r == 1 { STRAGGLER } else { WAITING };
        rank(dir.path(), r, launch, sync);
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for r in 0..4 {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(&format!("gpuspy-r{r}-"))),
            "{names:?}"
        );
    }
    let report = report_json(&[dir.path()]);
    let processes = report["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 4);
    // Every process reports its 4,000 launches: nothing was lost.
    assert!(
        processes.iter().all(|p| p["launches"] == 4000),
        "{processes:?}"
    );
    let ranks = per_rank(&report);
    let f = straggler(&report).unwrap_or_else(|| panic!("no rank-straggler: {ranks:?}"));
    assert_eq!(f["evidence"]["rank"], 1, "{f}");
    assert_eq!(f["layer"], "pipeline");
    assert_eq!(f["evidence"]["launches"], 4000);
    // Rank 1's own diagnosis differs from the others': it launches at a high rate. The
    // others are held at their syncs, whether or not that reaches the warning level.
    let verdicts = &report["rank_verdicts"];
    assert_eq!(
        verdicts["differ"],
        serde_json::json!([{"rank": 1, "verdict": "launch-bound"}]),
        "{ranks:?}"
    );
    assert!(
        verdicts["common"].is_null() || verdicts["common"] == "sync-stalled",
        "{verdicts} {ranks:?}"
    );
    // The others block longest.
    let imbalance = report["rank_imbalance"].as_array().unwrap();
    let blocked = imbalance
        .iter()
        .find(|i| i["measure"] == "blocked_ns")
        .unwrap();
    assert_ne!(blocked["rank"], 1);
    assert!(blocked["ratio"].as_f64().unwrap() >= 1.0);

    let even = tempfile::tempdir().unwrap();
    for r in 0..4 {
        rank(even.path(), r, WAITING.0, WAITING.1);
    }
    let report = report_json(&[even.path()]);
    assert!(
        straggler(&report).is_none(),
        "{} {:?}",
        report["findings"],
        per_rank(&report)
    );
    assert_eq!(report["rank_verdicts"]["differ"], serde_json::json!([]));
}

#[test]
fn a_thousand_rank_dumps_merge_in_seconds_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let template: Value =
        serde_json::from_slice(&std::fs::read(data("h200-torch-pageable.json")).unwrap()).unwrap();
    for r in 0..1000u32 {
        let mut d = template.clone();
        d["process"]["pid"] = (10_000 + r).into();
        d["process"]["rank"] = serde_json::json!({"rank": r, "source": "RANK", "world_size": 1000});
        std::fs::write(
            dir.path()
                .join(format!("gpuspy-r{r}-node{}-{}.json", r / 8, 10_000 + r)),
            serde_json::to_vec(&d).unwrap(),
        )
        .unwrap();
    }
    let started = std::time::Instant::now();
    let measured = run_with_peak_rss(
        std::process::Command::new(gpuspy())
            .args(["report", "--json"])
            .arg(dir.path()),
    );
    let elapsed = started.elapsed();
    assert_eq!(measured.status.code(), Some(0));
    let r: Value = serde_json::from_reader(std::io::BufReader::new(&measured.stdout)).unwrap();
    assert_eq!(r["processes"].as_array().unwrap().len(), 1000);
    assert_eq!(count(&r, "cuMemcpyHtoDAsync"), 200 * 1000);
    // The child's own CPU time, not the wall time: on a loaded machine the wall time also
    // counts the time it waited for a CPU. About 0.2 s here.
    let max_rss_mib = measured.max_rss_kib / 1024;
    eprintln!(
        "1,000 dumps: {elapsed:?} ({:.2} s of CPU), peak RSS {max_rss_mib} MiB",
        measured.cpu_s
    );
    assert!(
        measured.cpu_s < 10.0,
        "took {:.2} s of CPU ({elapsed:?})",
        measured.cpu_s
    );
    assert!(max_rss_mib < 256, "peak RSS of a child {max_rss_mib} MiB");
}

#[test]
fn a_collective_that_waited_is_a_blocking_event_on_the_timeline() {
    // Every all-reduce, all-gather and broadcast takes 2 ms; sends, receives and group
    // calls return at once (under the 1 ms that marks a wait).
    let run = run("nccl", &["0"], &[("FAKENCCL_DELAY_NS", "2000000")]);
    let dumps = run.dumps();
    let dump: Value = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    // The 16 most recent: the 3 broadcasts, the 10 all-gathers and the last 3 all-reduces.
    let recent = dump["timeline"]["recent_blocking"].as_array().unwrap();
    assert_eq!(recent.len(), 16, "{recent:?}");
    for e in recent {
        assert_eq!(e["kind"], "collective", "{e}");
        let ns = e["end_unix_ns"].as_u64().unwrap() - e["start_unix_ns"].as_u64().unwrap();
        assert!(ns >= 2_000_000, "{e}");
    }
}

fn nccl_section(run: &Run) -> Value {
    let dumps = run.dumps();
    assert_eq!(dumps.len(), 1);
    let dump: Value = serde_json::from_slice(&std::fs::read(&dumps[0]).unwrap()).unwrap();
    dump["nccl"].clone()
}

fn op(nccl: &Value, op: &str, datatype: &str) -> (u64, u64) {
    nccl["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == op && o["datatype"] == datatype)
        .map(|o| (o["calls"].as_u64().unwrap(), o["bytes"].as_u64().unwrap()))
        .unwrap_or((0, 0))
}

#[test]
fn nccl_calls_are_counted_with_bytes_and_matching_communicator_keys() {
    let ranks: Vec<Run> = (0..2)
        .map(|r| run("nccl", &[&r.to_string()], &[]))
        .collect();
    let keys: Vec<Vec<String>> = ranks
        .iter()
        .map(|run| {
            let n = nccl_section(run);
            assert_eq!(op(&n, "AllReduce", "float32"), (100, 100 * 1024 * 4));
            assert_eq!(op(&n, "AllGather", "bfloat16"), (10, 10 * 512 * 2));
            assert_eq!(op(&n, "Send", "int8"), (5, 5 * 256));
            assert_eq!(op(&n, "Recv", "int8"), (5, 5 * 256));
            assert_eq!(op(&n, "Broadcast", "float64"), (3, 3 * 8 * 8));
            assert_eq!(n["groups"], 5);
            let comms = n["communicators"].as_array().unwrap();
            assert_eq!(comms.len(), 2, "{comms:?}");
            // The world communicator: 100 + 10 + 5 + 5 operations; the split one: 3.
            let ops: Vec<u64> = comms
                .iter()
                .map(|c| c["operations"].as_u64().unwrap())
                .collect();
            assert!(ops.contains(&120) && ops.contains(&3), "{ops:?}");
            comms
                .iter()
                .map(|c| c["key"].as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    // Both ranks computed the same keys, for the world and for the split communicator.
    assert_eq!(keys[0], keys[1]);
    let r = ranks[0].report();
    assert_eq!(count(&r, "ncclAllReduce"), 100);
    assert_eq!(count(&r, "ncclGroupStart"), 5);
    // Merged over both ranks, each communicator is seen from its two members.
    let both = report_json(&[ranks[0].out_dir.path(), ranks[1].out_dir.path()]);
    let comms = both["nccl"]["communicators"].as_array().unwrap();
    assert_eq!(comms.len(), 2);
    assert!(comms.iter().all(|c| c["members_seen"] == 2), "{comms:?}");
}

#[test]
fn a_rank_that_issued_a_different_number_of_collectives_is_named() {
    let env = |r: &str| [("RANK", r.to_string()), ("WORLD_SIZE", "3".to_string())];
    let runs: Vec<Run> = [("0", "link"), ("1", "skip"), ("2", "link")]
        .iter()
        .map(|&(r, mode)| {
            let e = env(r);
            let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
            run("nccl", &[r, mode], &e)
        })
        .collect();
    let dirs: Vec<&std::path::Path> = runs.iter().map(|r| r.out_dir.path()).collect();
    let r = report_json(&dirs);
    let comms = r["nccl"]["communicators"].as_array().unwrap();
    let world = comms
        .iter()
        .find(|c| c["members_seen"] == 3 && c["operations"] == 120 + 119 + 120)
        .unwrap_or_else(|| panic!("{comms:?}"));
    assert_eq!(world["disagreement"]["common_operations"], 120);
    assert_eq!(
        world["disagreement"]["members"],
        serde_json::json!([{"member": "rank 1", "operations": 119}])
    );
    // The split communicator (3 broadcasts each) is in agreement.
    assert!(comms
        .iter()
        .any(|c| c["operations"] == 9 && c["disagreement"].is_null()));
    let out = std::process::Command::new(gpuspy())
        .arg("report")
        .args(&dirs)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "members disagree on the operations issued (rank 1 issued 119; 120 for the others)"
        ),
        "{text}"
    );
}

#[test]
fn nccl_reached_through_dlopen_and_dlsym_is_counted_too() {
    let run = run("nccl", &["0", "dlopen"], &[]);
    assert!(run.stdout().contains("nccl rank 0: done"));
    let n = nccl_section(&run);
    assert_eq!(op(&n, "AllReduce", "float32"), (100, 409_600));
    assert_eq!(n["communicators"].as_array().unwrap().len(), 2);
}

fn h200_ddp(run: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/h200-ddp-{run}"))
}

#[test]
fn the_slow_rank_of_a_ddp_run_on_two_h200s_is_named_from_its_nccl_kernels() {
    // bench/multi/ddp.sh (bench/results/gpu-2026-11-29-ddp-3): rank 1 sleeps 20 ms per
    // step before its batch; rank 0's all-reduce kernels wait for it.
    let slow = report_json(&[&h200_ddp("slow")]);
    let straggler = slow["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "rank-straggler")
        .unwrap_or_else(|| panic!("no rank-straggler in {}", slow["findings"]));
    assert_eq!(straggler["evidence"]["rank"], 1);
    assert_eq!(straggler["evidence"]["measured_on"], "gpu");
    assert_eq!(straggler["heuristic"], false);
    // 1 + 8 x 199 all-reduces per rank (DDP's buckets), 100 GiB each.
    let ops = &slow["nccl"]["ops"];
    let all_reduce = ops
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "AllReduce")
        .unwrap();
    assert_eq!(
        (all_reduce["calls"].as_u64(), all_reduce["bytes"].as_u64()),
        (Some(2 * 1593), Some(2 * 107_374_182_400))
    );
    let c = slow["nccl"]["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["op"] == "AllReduce")
        .unwrap()
        .clone();
    assert_eq!(
        (c["kernels"].as_u64(), c["ranks"].as_u64()),
        (Some(3186), Some(2))
    );
    // Bus bandwidth from the rank that waited least, against 18 NVLink links of 26.562 GB/s.
    let busbw = c["busbw_bytes_per_s"].as_f64().unwrap();
    assert!((busbw / 1e9 - 243.4).abs() < 0.1, "{busbw}");
    assert_eq!(slow["nccl"]["link_peak"]["link"], "NVLink");
    assert_eq!(slow["nccl"]["link_peak"]["bytes_per_s"], 18.0 * 26_562e6);
    let text = report_text(&h200_ddp("slow"));
    assert!(
        text.contains("    rank  host                  pid      steady   waiting   in NCCL    launches\n       1  vm                    756      14.4 s     3.8 %     3.1 %       15002"),
        "{text}"
    );
    // Large copies against the PCIe gen5 x16 peak; 4-byte .item() copies are not judged.
    assert!(
        text.contains("copies HtoD pinned: 200 x, 800.0 MiB at 33.4 GB/s, 53 % of the PCIe peak\n"),
        "{text}"
    );
    assert!(
        text.contains("copies DtoH pinned: 202 x, 816 B at 0.0 GB/s\n"),
        "{text}"
    );
    // torchrun's agent made driver calls but no context: no GPU section.
    assert_eq!(slow["processes"].as_array().unwrap().len(), 3);
    assert_eq!(slow["gpu"].as_array().unwrap().len(), 2);

    // The slow rank's wait inside rank 0's all-reduce kernels is not communication.
    assert!(
        slow["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != "comm-bound"),
        "{}",
        slow["findings"]
    );

    let even = report_json(&[&h200_ddp("even")]);
    assert!(
        even["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != "rank-straggler"),
        "{}",
        even["findings"]
    );
}

#[test]
fn a_ddp_run_whose_all_reduces_dominate_on_two_h200s_is_comm_bound() {
    // bench/multi/ddp.sh RUNS=comm STEPS=1000 (bench/results/gpu-2026-11-29-ddp-4):
    // batches of 8, so 512 MiB of all-reduce per step is most of the GPU's work. Each
    // rank built its model on the host after NCCL's first kernels: a 5 s pause in the
    // span, which the working span leaves out.
    let r = report_json(&[&h200_ddp("comm")]);
    assert_eq!(r["verdict"], "comm-bound", "{}", r["findings"]);
    let f = &r["findings"][0];
    assert!(f["impact"].as_f64().unwrap() > 0.3, "{f}");
    assert_eq!(f["evidence"]["busiest_collective"], "AllReduce");
    let busbw = f["evidence"]["busbw_bytes_per_s"].as_f64().unwrap();
    assert!((busbw / 1e9 - 218.9).abs() < 0.1, "{busbw}");
}
