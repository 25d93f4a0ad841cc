use crate::support::*;

fn pairs(v: &[(&str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|(s, n)| (s.to_string(), *n)).collect()
}

#[test]
fn exported_symbols_door_counts_every_call() {
    let run = run("linked", &["1000", "10"], &[]);
    let r = run.report();
    assert_eq!(count(&r, "cuLaunchKernel"), 1000);
    assert_eq!(
        symbols(&r, "cuLaunchKernel"),
        pairs(&[("cuLaunchKernel", 1000)])
    );
    assert_eq!(count(&r, "cuStreamSynchronize"), 10);
    assert_eq!(count(&r, "cuCtxSynchronize"), 1);
    assert_eq!(count(&r, "cuInit"), 1);
    assert_eq!(count(&r, "cuMemAlloc"), 1);
    assert_eq!(count(&r, "cuStreamQuery"), 5);
    assert_eq!(run.dumps().len(), 1);
}

#[test]
fn dlsym_door_hands_out_wrappers_of_the_exact_variant() {
    let run = run("dlsym", &[], &[]);
    let r = run.report();
    assert_eq!(count(&r, "cuLaunchKernel"), 500);
    assert_eq!(
        symbols(&r, "cuLaunchKernel"),
        pairs(&[("cuLaunchKernel", 300), ("cuLaunchKernel_ptsz", 200)])
    );
    assert_eq!(count(&r, "cuStreamSynchronize"), 7);
    assert_eq!(count(&r, "cuInit"), 1);
    let unwrapped = r["unwrapped_symbols"].as_array().unwrap();
    assert!(
        unwrapped.iter().any(|s| s == "cuDeviceGetCount"),
        "{unwrapped:?}"
    );
    // A hook the driver lacks answers CUDA_ERROR_NOT_FOUND instead of crashing.
    assert!(
        run.stdout().contains("missing symbol returned 500"),
        "{}",
        run.stdout()
    );
}

#[test]
fn resolver_door_routes_by_version_and_per_thread_flags() {
    let run = run("resolver", &[], &[]);
    let r = run.report();
    assert_eq!(
        symbols(&r, "cuLaunchKernel"),
        pairs(&[("cuLaunchKernel", 100), ("cuLaunchKernel_ptsz", 400)])
    );
    assert_eq!(
        symbols(&r, "cuMemcpyHtoDAsync"),
        pairs(&[("cuMemcpyHtoDAsync_v2_ptsz", 30)])
    );
    assert_eq!(
        symbols(&r, "cuMemcpyHtoD"),
        pairs(&[("cuMemcpyHtoD_v2_ptds", 20)])
    );
    assert_eq!(symbols(&r, "cuMemAlloc"), pairs(&[("cuMemAlloc_v2", 1)]));
    assert_eq!(
        symbols(&r, "cuStreamSynchronize"),
        pairs(&[("cuStreamSynchronize_ptsz", 9)])
    );
    // This driver has no cuCtxSynchronize_v2: version 13000 falls back to the plain export.
    assert_eq!(
        symbols(&r, "cuCtxSynchronize"),
        pairs(&[("cuCtxSynchronize", 1)])
    );
    // The resolver itself: 1 call through the dlsym'd pointer, 9 through the pointer it
    // returned for itself (one an unknown name), 1 through the 4-argument form.
    assert_eq!(
        symbols(&r, "cuGetProcAddress"),
        pairs(&[("cuGetProcAddress", 1), ("cuGetProcAddress_v2", 10)])
    );
    assert_eq!(api(&r, "cuGetProcAddress")["errors"], 1);
    let unwrapped = r["unwrapped_symbols"].as_array().unwrap();
    assert!(
        unwrapped.iter().any(|s| s == "cuDeviceGetAttribute"),
        "{unwrapped:?}"
    );
}

#[test]
fn eight_threads_each_counted_exactly() {
    let run = run("threads", &[], &[]);
    let r = run.report();
    let expected: u64 = (0..8).map(|id| 10_000 + id).sum();
    assert_eq!(count(&r, "cuLaunchKernel"), expected);
    assert_eq!(count(&r, "cuStreamSynchronize"), 80);
    assert_eq!(r["processes"][0]["threads"], 8);
}
