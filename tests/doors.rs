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

/// The hook list, read from its source: (name, is NCCL) per line of `hook_list!`.
fn hook_list() -> Vec<(String, bool)> {
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shim/src/hot/hooks.rs"),
    )
    .unwrap();
    let list = &source[source
        .find("\nmacro_rules! hook_list {")
        .expect("the hook_list! macro")..];
    list.lines()
        .filter_map(|line| {
            let line = line.strip_prefix("    ")?;
            let end = line.find(['(', ' '])?;
            let name = &line[..end];
            let hooked = (name.starts_with("cu") || name.starts_with("nccl"))
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            hooked.then(|| (name.to_string(), name.starts_with("nccl")))
        })
        .collect()
}

/// The name the CUDA runtime asks `cuGetProcAddress` for: no `_ptsz`/`_ptds`, no `_vN`.
fn resolver_name(export: &str) -> &str {
    let name = export
        .strip_suffix("_ptsz")
        .or_else(|| export.strip_suffix("_ptds"))
        .unwrap_or(export);
    match name.rsplit_once("_v") {
        Some((head, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => name,
    }
}

/// Every hook of the list, in the fake driver and NCCL, reaches its own wrapper through
/// every door: the exported symbol, `dlsym` on the library's handle, and (driver hooks)
/// `cuGetProcAddress_v2` at some version and flag; the fake NCCL has the `pncclX` alias
/// each NCCL wrapper forwards to. This is also what keeps the fakes' exports and the fake
/// driver's version table in step with the list.
#[test]
fn every_hook_resolves_through_every_door() {
    // tools/fakecuda leaves these out on purpose, to stand for a partial driver.
    const FAKE_LACKS: [&str; 10] = [
        "cuCtxSynchronize_v2",
        "cuLaunchCooperativeKernelMultiDevice",
        "cuMemcpyBatchAsync",
        "cuMemcpyBatchAsync_ptsz",
        "cuMemcpyBatchAsync_v2",
        "cuMemcpyBatchAsync_v2_ptsz",
        "cuMemcpy3DBatchAsync",
        "cuMemcpy3DBatchAsync_ptsz",
        "cuMemcpy3DBatchAsync_v2",
        "cuMemcpy3DBatchAsync_v2_ptsz",
    ];
    let hooks = hook_list();
    assert!(hooks.len() > 200, "{} hooks read", hooks.len());
    assert_eq!(hooks.iter().filter(|(_, nccl)| *nccl).count(), 14);
    for missing in FAKE_LACKS {
        assert!(hooks.iter().any(|(n, _)| n == missing), "{missing}");
    }
    let args: Vec<String> = hooks
        .iter()
        .map(|(name, nccl)| match nccl {
            true => format!("nccl:{name}"),
            false => format!("cu:{name}:{}", resolver_name(name)),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run("every_hook", &args, &[]);
    let stdout = run.stdout();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), hooks.len(), "{stdout}");
    let mut wrong = Vec::new();
    for ((name, nccl), line) in hooks.iter().zip(&lines) {
        let lacked = FAKE_LACKS.contains(&name.as_str());
        let alias = format!("p{name}");
        let (library, resolver) = match (nccl, lacked) {
            (true, _) => (name.as_str(), alias.as_str()),
            (false, true) => ("-", "-"),
            (false, false) => (name.as_str(), name.as_str()),
        };
        let expected = format!("{name} {name} {library} {resolver}");
        if *line != expected {
            wrong.push(format!("expected {expected:?}, got {line:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
