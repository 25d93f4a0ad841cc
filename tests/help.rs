use crate::support::*;

/// The verbs, as `gpuspy --help` lists them.
fn verbs() -> Vec<String> {
    let help = String::from_utf8(gpuspy_cmd(&["--help"]).stdout).unwrap();
    let commands = help.split("Commands:\n").nth(1).unwrap();
    commands
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .map(str::to_string)
        .collect()
}

/// Every verb's help has examples that use it, and says which environment variables change
/// what it does (or that none do).
#[test]
fn each_verb_has_examples_and_its_environment() {
    let verbs = verbs();
    assert_eq!(
        verbs,
        [
            "run",
            "demo",
            "report",
            "diff",
            "check",
            "explain",
            "shim-path",
            "completions",
            "man"
        ]
    );
    for verb in &verbs {
        for flag in ["-h", "--help"] {
            let out = gpuspy_cmd(&[verb, flag]);
            assert!(out.status.success(), "{verb} {flag}");
            let help = String::from_utf8(out.stdout).unwrap();
            let examples: Vec<&str> = help
                .split("Examples:\n")
                .nth(1)
                .unwrap_or_else(|| panic!("{verb} {flag}: no examples\n{help}"))
                .lines()
                .take_while(|l| !l.is_empty())
                .collect();
            assert!(
                (2..=4).contains(&examples.len())
                    && examples
                        .iter()
                        .all(|e| e.contains(&format!("gpuspy {verb}"))
                            || e.contains(&format!("$(gpuspy {verb})"))),
                "{verb} {flag}: {examples:?}"
            );
            assert!(help.contains("\nEnvironment"), "{verb} {flag}:\n{help}");
        }
    }
}

/// Every argument of every verb is described: no bare `<PATHS>...` or `--budget <FILE>`.
#[test]
fn every_argument_is_described() {
    for verb in verbs() {
        let help = String::from_utf8(gpuspy_cmd(&[&verb, "-h"]).stdout).unwrap();
        let listed = help
            .split("\nExamples:")
            .next()
            .unwrap()
            .lines()
            .skip_while(|l| !l.starts_with("Arguments:") && !l.starts_with("Options:"))
            .filter(|l| l.starts_with("  "));
        for line in listed {
            // `  -o, --out <OUT>  Directory for the dumps ...`: the name, then two spaces
            // and the description.
            let described = line
                .trim_start()
                .split_once("  ")
                .is_some_and(|(_, d)| !d.trim().is_empty());
            assert!(described, "{verb}: {line:?} has no description\n{help}");
        }
    }
}

#[test]
fn completions_generate_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F _gpuspy"),
        ("zsh", "#compdef gpuspy"),
        ("fish", "complete -c gpuspy"),
    ] {
        let out = gpuspy_cmd(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        for word in ["report", "shim-path", "per-process", "budget"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    // The bash script parses.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("gpuspy.bash");
    std::fs::write(&script, gpuspy_cmd(&["completions", "bash"]).stdout).unwrap();
    let parsed = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(parsed.success());
    let refused = gpuspy_cmd(&["completions", "tcsh"]);
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn man_pages_generate_one_per_verb() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let out = gpuspy_cmd(&["man", s(&pages)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut expected: Vec<String> = verbs().iter().map(|v| format!("gpuspy-{v}.1")).collect();
    expected.push("gpuspy.1".into());
    expected.sort();
    assert_eq!(names, expected);
    let run = std::fs::read_to_string(pages.join("gpuspy-run.1")).unwrap();
    assert!(run.contains("\n.TH gpuspy-run 1 "), "{run}");
    // The same descriptions and examples as --help.
    assert!(
        run.contains("GPUSPY_SHIM") && run.contains("Examples:"),
        "{run}"
    );
}

/// The numbers in `text`, thousands separators dropped, each with its decimals: `19,398`
/// is (19398, 0), `+0.29` is (0.29, 2), `11.7–15.0` is (11.7, 1) and (15.0, 1).
fn numbers(text: &str) -> Vec<(f64, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() || (i > 0 && chars[i - 1].is_alphanumeric()) {
            i += 1;
            continue;
        }
        let mut digits = String::new();
        let mut decimals = None;
        while i < chars.len() {
            let c = chars[i];
            let next_digit = chars.get(i + 1).is_some_and(|c| c.is_ascii_digit());
            if c.is_ascii_digit() {
                digits.push(c);
                decimals = decimals.map(|d| d + 1);
            } else if c == ','
                && decimals.is_none()
                && (1..=3).all(|k| chars.get(i + k).is_some_and(|c| c.is_ascii_digit()))
                && chars.get(i + 4).is_none_or(|c| !c.is_ascii_digit())
            {
                // A thousands separator: exactly three digits follow.
            } else if c == '.' && next_digit && decimals.is_none() {
                digits.push('.');
                decimals = Some(0);
            } else {
                break;
            }
            i += 1;
        }
        out.push((digits.parse().unwrap(), decimals.unwrap_or(0)));
    }
    out
}

/// The text of every file under `path` (a file or a directory), archives left out.
fn recorded(path: &std::path::Path) -> String {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        entries.iter().map(|p| recorded(p)).collect()
    } else if path.to_string_lossy().ends_with(".tar.gz") {
        String::new()
    } else {
        String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
    }
}

/// The figures of `claim` that no number of `record` gives when rounded as the claim
/// writes it.
fn unrecorded(claim: &str, record: &str) -> Vec<String> {
    let known = numbers(record);
    numbers(claim)
        .into_iter()
        .filter(|&(x, d)| {
            let scale = 10f64.powi(d as i32);
            !known
                .iter()
                .any(|&(y, _)| ((y * scale).round() - x * scale).abs() < 1e-6)
        })
        .map(|(x, d)| format!("{x:.d$}"))
        .collect()
}

/// The paths in backticks under bench/results in `text`, which must exist.
fn result_files(text: &str) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| p.starts_with("bench/results/"))
        .map(|p| {
            let path = root.join(p);
            assert!(path.exists(), "{p} is named but does not exist");
            path
        })
        .collect()
}

#[test]
fn figures_are_matched_rounded_as_written() {
    assert_eq!(
        numbers("+0.29 % of 19,398 B, 11.7–15.0 ms, x16 2,1"),
        [
            (0.29, 2),
            (19398.0, 0),
            (11.7, 1),
            (15.0, 1),
            (2.0, 0),
            (1.0, 0)
        ]
    );
    assert_eq!(
        unrecorded(
            "**+0.82 ms**, **+2.4 ms**, 2.5",
            "median 0.822 ms, p90 2.388 ms"
        ),
        ["2.5"]
    );
}

/// Every figure of the README's overhead table and of its diagnosis paragraph was
/// recorded by a run: each row (and the paragraph) names its files under bench/results,
/// and each figure in bold in a row, and each percentage of the paragraph, rounded as the
/// README writes it, is a number in those files.
#[test]
fn readme_figures_come_from_recorded_runs() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let table = readme.split("## Measured overhead").nth(1).unwrap();
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("| measure"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(rows.len() >= 8, "{rows:?}");
    for row in rows {
        let files = result_files(row);
        assert!(!files.is_empty(), "names no recorded run: {row}");
        let record: String = files.iter().map(|f| recorded(f)).collect();
        let bold: String = row
            .split("**")
            .skip(1)
            .step_by(2)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(!bold.is_empty(), "no figure in bold: {row}");
        let missing = unrecorded(&bold, &record);
        assert!(missing.is_empty(), "{missing:?} not in {files:?}: {row}");
    }
    let paragraph = readme
        .split("\n\n")
        .find(|p| p.contains("staged workloads") && p.contains("bench/results/"))
        .unwrap();
    let files = result_files(paragraph);
    let record: String = files.iter().map(|f| recorded(f)).collect();
    let pieces: Vec<&str> = paragraph.split(" %").collect();
    let shares: String = pieces[..pieces.len() - 1]
        .iter()
        .filter_map(|before| before.rsplit(' ').next())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(shares.split(' ').count() >= 6, "{shares}");
    let missing = unrecorded(&shares, &record);
    assert!(
        missing.is_empty(),
        "{missing:?} not in {files:?}: {paragraph}"
    );
}
