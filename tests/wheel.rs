use crate::support::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `[tool.gpuspy] manylinux` in pyproject.toml, the tag tools/wheel-check.sh builds the
/// wheel with, as (major, minor): "manylinux_2_34" is (2, 34).
fn wheel_glibc() -> (u32, u32) {
    let pyproject = Path::new(env!("CARGO_MANIFEST_DIR")).join("pyproject.toml");
    let doc: toml::Table = std::fs::read_to_string(pyproject).unwrap().parse().unwrap();
    let tag = doc["tool"]["gpuspy"]["manylinux"].as_str().unwrap();
    let (major, minor) = tag
        .strip_prefix("manylinux_")
        .and_then(|v| v.split_once('_'))
        .unwrap_or_else(|| panic!("{tag} is not manylinux_X_Y"));
    (major.parse().unwrap(), minor.parse().unwrap())
}

/// What the wheel installs in `<prefix>/lib/gpuspy/`: tools/pep517/gpuspy_build.py's
/// `SHIPPED`, the shim and the fakes `gpuspy demo` runs against.
fn wheel_libraries() -> Vec<String> {
    let backend = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pep517/gpuspy_build.py");
    let source = std::fs::read_to_string(backend).unwrap();
    let list = source
        .lines()
        .find_map(|l| l.strip_prefix("SHIPPED = [")?.strip_suffix(']'))
        .expect("no `SHIPPED = [...]` line in gpuspy_build.py");
    list.split(", ")
        .map(|name| name.trim_matches('"').to_string())
        .collect()
}

/// The `NEEDED` libraries and the `GLIBC_X.Y[.Z]` versions an ELF file requires, from
/// `objdump -p` (binutils, which the C compiler the tests need brings along).
fn dynamic_needs(file: &Path) -> (BTreeSet<String>, BTreeSet<(u32, u32)>) {
    let out = Command::new("objdump")
        .arg("-p")
        .arg(file)
        .output()
        .expect("objdump (binutils) is needed to read the shim's symbol versions");
    assert!(out.status.success(), "objdump -p {}", file.display());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut needed = BTreeSet::new();
    let mut glibc = BTreeSet::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["NEEDED", lib] => {
                needed.insert(lib.to_string());
            }
            // Version References: "0x0d696914 0x00 07 GLIBC_2.34".
            [_, _, _, version] => {
                if let Some(v) = version.strip_prefix("GLIBC_") {
                    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
                    glibc.insert((parts.next().unwrap(), parts.next().unwrap()));
                }
            }
            _ => {}
        }
    }
    (needed, glibc)
}

/// What the wheel ships (the CLI, the shim and the fakes) must load on every system its tag
/// claims: no glibc symbol version
/// newer than the tag, and only libraries the manylinux policy lets a wheel take from the
/// system (auditwheel's policy list). libcuda must never be a link dependency (auditwheel
/// repair would graft the driver into the wheel; the shim finds it with dlsym), nor
/// libpython (one shim serves every Python and non-Python processes alike).
#[test]
fn the_shim_and_the_cli_need_no_glibc_newer_than_the_wheel_tag() {
    let (major, minor) = wheel_glibc();
    let allowed = [
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libgcc_s.so.1",
        "ld-linux-x86-64.so.2",
    ];
    let bin_dir = &artifacts().bin_dir;
    let libraries = wheel_libraries();
    assert_eq!(
        libraries,
        [
            "libgpuspy.so",
            "libcuda.so",
            "libcupti.so",
            "libnvidia_ml.so"
        ]
    );
    for file in libraries.iter().map(|l| bin_dir.join(l)).chain([gpuspy()]) {
        let (needed, glibc) = dynamic_needs(&file);
        assert!(
            needed.contains("libc.so.6"),
            "{}: no NEEDED libc.so.6 in {needed:?}: objdump output not understood",
            file.display()
        );
        let extra: Vec<_> = needed
            .iter()
            .filter(|n| !allowed.contains(&n.as_str()))
            .collect();
        assert!(extra.is_empty(), "{} links {extra:?}", file.display());
        let newest = *glibc.iter().max().expect("no GLIBC_ symbol versions found");
        assert!(
            newest <= (major, minor),
            "{} needs GLIBC_{}.{}, newer than the wheel's manylinux_{major}_{minor}",
            file.display(),
            newest.0,
            newest.1
        );
    }
}

/// The wheel's layout, `<prefix>/bin/gpuspy` and `<prefix>/lib/gpuspy/libgpuspy.so`, is one
/// `gpuspy run` and `gpuspy shim-path` find without help; a binary with its shim neither
/// beside it nor there names both places; `GPUSPY_SHIM` wins over both.
#[test]
fn shim_path_finds_the_wheel_layout() {
    let prefix = tempfile::tempdir().unwrap();
    let (bin, lib) = (prefix.path().join("bin"), prefix.path().join("lib/gpuspy"));
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("gpuspy");
    std::fs::copy(gpuspy(), &exe).unwrap();

    let out = Command::new(&exe).arg("shim-path").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(s(&bin.join("libgpuspy.so")))
            && err.contains(s(&lib.join("libgpuspy.so")))
            && err.contains("GPUSPY_SHIM"),
        "{err}"
    );

    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(shim(), lib.join("libgpuspy.so")).unwrap();
    let out = Command::new(&exe).arg("shim-path").output().unwrap();
    assert!(out.status.success());
    let expected = std::fs::canonicalize(lib.join("libgpuspy.so")).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}\n", expected.display())
    );

    // `gpuspy run` from the same layout preloads it: the program's calls are counted.
    let dumps = prefix.path().join("out");
    let out = Command::new(&exe)
        .args(["run", "-o", s(&dumps), "--"])
        .arg(program("simulated_step"))
        .arg("3")
        .env("LD_LIBRARY_PATH", &artifacts().driver_dir)
        .env_remove("LD_PRELOAD")
        .env_remove("FAKECUDA_DELAY_NS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(count(&report_json(&[&dumps]), "cuLaunchKernel"), 120);

    let elsewhere = prefix.path().join("other.so");
    std::fs::copy(shim(), &elsewhere).unwrap();
    let out = Command::new(&exe)
        .arg("shim-path")
        .env("GPUSPY_SHIM", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{}\n", std::fs::canonicalize(&elsewhere).unwrap().display())
    );
}

/// `gpuspy demo` from the wheel's layout, with what the wheel ships in
/// `<prefix>/lib/gpuspy/`: the job runs against the fakes found there. With one of them
/// missing, one line names it and nothing runs.
#[test]
fn the_demo_runs_from_the_wheel_layout_and_names_a_missing_fake() {
    let prefix = tempfile::tempdir().unwrap();
    let (bin, lib) = (prefix.path().join("bin"), prefix.path().join("lib/gpuspy"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    let exe = bin.join("gpuspy");
    std::fs::copy(gpuspy(), &exe).unwrap();
    for name in wheel_libraries() {
        std::fs::copy(artifacts().bin_dir.join(&name), lib.join(&name)).unwrap();
    }
    let out = prefix.path().join("out");
    let run = crate::demo::demo(&exe, &out);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(count(&report_json(&[&out]), "cuLaunchKernel"), 40_000);

    std::fs::remove_file(lib.join("libnvidia_ml.so")).unwrap();
    let missing = prefix.path().join("missing");
    let run = crate::demo::demo(&exe, &missing);
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        format!(
            "gpuspy: {} not found: gpuspy demo needs the fake CUDA driver, CUPTI and NVML \
             beside libgpuspy.so (the pip wheel ships them; in a checkout, `cargo build \
             --release` builds them)\n",
            std::fs::canonicalize(&lib)
                .unwrap()
                .join("libnvidia_ml.so")
                .display()
        )
    );
    assert!(run.stdout.is_empty());
    assert!(!missing.exists());
}

#[test]
fn version_prints_the_crate_version_and_its_build() {
    let out = gpuspy_cmd(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "gpuspy {} ({})\n",
            env!("CARGO_PKG_VERSION"),
            env!("GPUSPY_BUILD")
        )
    );
    // Built from this checkout, the build names its commit.
    if std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".git")
        .exists()
    {
        assert_ne!(env!("GPUSPY_BUILD"), "unknown");
    }
}
