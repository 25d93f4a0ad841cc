use crate::support::*;

const KNOBS: &[(&str, &str)] = &[
    ("FAKECUDA_DELAY_NS", "cuStreamSynchronize=2000000"),
    ("FAKECUDA_FAIL", "cuStreamQuery=600:3,cuCtxSynchronize=999"),
];

#[test]
fn copies_are_classified_by_direction_and_host_memory() {
    let r = run("linked", &["10", "1"], KNOBS).report();
    // Pageable: the sync copy, the async copy, and the copy after cuMemFreeHost.
    assert_eq!(copies(&r, "HtoD", "pageable"), (3, 4096 + 4096 + 10));
    assert_eq!(copies(&r, "HtoD", "pinned"), (2, 8192 + 100));
    assert_eq!(copies(&r, "HtoD", "managed"), (1, 64));
    assert_eq!(copies(&r, "DtoH", "pinned"), (1, 8192));
    assert_eq!(copies(&r, "DtoH", "pageable"), (1, 4096));
    assert_eq!(
        api(&r, "cuMemcpyHtoDAsync")["bytes"],
        4096 + 8192 + 100 + 10 + 64
    );
    assert_eq!(api(&r, "cuMemAlloc")["bytes"], 1 << 20);
    assert_eq!(api(&r, "cuMemPrefetchAsync")["bytes"], 1 << 16);
}

#[test]
fn implicit_syncs_by_cause() {
    let r = run("linked", &["10", "4"], KNOBS).report();
    // 4 stream syncs; the failing cuCtxSynchronize is not a completed sync.
    assert_eq!(sync(&r, "explicit"), Some(4));
    assert_eq!(sync(&r, "sync-copy"), Some(2));
    assert_eq!(sync(&r, "pageable-async-copy"), Some(2));
    assert_eq!(sync(&r, "free"), Some(2));
}

#[test]
fn errors_are_counted_by_code_and_not_ready_is_a_status() {
    let r = run("linked", &["10", "1"], KNOBS).report();
    let query = api(&r, "cuStreamQuery");
    assert_eq!(query["count"], 5);
    assert_eq!(query["errors"], 0);
    assert_eq!(
        query["results"],
        serde_json::json!([{"code": 600, "count": 3}])
    );
    let ctx = api(&r, "cuCtxSynchronize");
    assert_eq!(ctx["errors"], 1);
    assert_eq!(
        ctx["results"],
        serde_json::json!([{"code": 999, "count": 1}])
    );
}

#[test]
fn disabled_shim_forwards_and_writes_nothing() {
    let run = run("linked", &["10", "1"], &[("GPUSPY_DISABLE", "1")]);
    assert!(run.stdout().contains("linked: done"));
    assert!(run.dumps().is_empty());
}
