//! `load`, the first stage of the pipeline (docs/design.md): finds dump files, reads and
//! validates each, and merges them into one `Profile`. Pure: it judges nothing. Analysis
//! that needs each dump on its own (a process's own verdict) is handed every dump's profile
//! as it is read (`profile`'s `each`), so memory stays bounded by the merged profile however
//! many rank dumps there are.

use crate::analysis::profile::Profile;
use crate::analysis::runs::{run_of, Span};
use anyhow::{bail, Context, Result};
use gpuspy_format::{parse_dump, Dump};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest dump a reader accepts (README, docs/dump-format.md). A dump holds one record
/// per hooked symbol, sync cause and copy kind: kilobytes, a few MB with GPU-side data. A
/// larger file is not one of ours, and reading it would cost memory.
pub const MAX_DUMP_BYTES: u64 = 256 << 20;

/// The dumps directly in `dir`, sorted: the one directory walker (`dump_files`,
/// `run_paths`).
fn dumps_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list directory", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_dump_name(p))
        .collect();
    found.sort();
    Ok(found)
}

/// Loads and merges every dump under `paths` one at a time, so memory stays bounded by the
/// merged profile however many rank dumps there are; `each` sees every dump's own profile
/// before it is merged. Of several dumps of one process image, only the latest is read
/// (`latest_of_each_image`), with one note. Warns, in one line each, about dumps of another
/// user's directory, and about dumps owned by someone the reader does not trust
/// (`owner_of`).
pub fn profile(paths: &[PathBuf], runs: Runs, mut each: impl FnMut(&Profile)) -> Result<Profile> {
    let mut p = Profile::default();
    let mut untrusted = Vec::new();
    // Directories of another user's, holding that user's dumps: each named once.
    let mut theirs = BTreeSet::new();
    let named: BTreeSet<&PathBuf> = paths.iter().filter(|p| !p.is_dir()).collect();
    let files = dump_files(paths)?;
    let stamps = stamps(&files);
    let (files, stamps) = match runs {
        Runs::All => (files, stamps),
        Runs::Latest => {
            let (files, stamps, older) = latest_run(files, stamps, &named);
            if older > 0 {
                crate::safe_text::eprint_line(format_args!(
                    "note: left out {older} older run(s) in these directories: this report is of the latest run (`--all-runs` merges them all)"
                ));
            }
            (files, stamps)
        }
    };
    let (files, copies) = latest_of_each_image(files, &stamps);
    if copies > 0 {
        crate::safe_text::eprint_line(format_args!(
            "note: left out {copies} dump(s) of a process image another file holds too (same host, pid, start time, first call, run token and image): each image counts once, from its latest dump"
        ));
    }
    // A file named like a dump that holds none is skipped where a directory listing found
    // it (`gpuspy report --json DIR > DIR/gpuspy-report.json` leaves one, empty while the
    // report runs), and an error where it was named.
    let mut skipped = Vec::new();
    for file in files {
        let (dump, meta) = match read_dump(&file) {
            Ok(read) => read,
            Err(e) => match holds_no_dump(&file).filter(|_| !named.contains(&file)) {
                Some(what) => {
                    skipped.push(format!("{} ({})", file.display(), what.describe()));
                    continue;
                }
                None => return Err(e),
            },
        };
        match owner_of(&file, &meta) {
            Owner::Trusted => {}
            Owner::TheirDirectory(dir) => {
                theirs.insert(format!("{} (uid {})", dir.display(), meta.uid()));
            }
            Owner::Planted => untrusted.push(format!("{} (uid {})", file.display(), meta.uid())),
        }
        let one = Profile::from_dump(&file, dump);
        each(&one);
        p.absorb(one);
    }
    if !skipped.is_empty() {
        crate::safe_text::eprint_line(format_args!(
            "note: skipped {} file(s) named like dumps that hold none: {}",
            skipped.len(),
            skipped.join(", ")
        ));
        if p.processes.is_empty() {
            bail!("no gpuspy dumps left to report once those are skipped");
        }
    }
    if !theirs.is_empty() {
        crate::safe_text::eprint_line(format_args!(
            "warning: dumps of another user, in that user's directory (every figure from them is theirs to choose): {}",
            theirs.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if !untrusted.is_empty() {
        crate::safe_text::eprint_line(format_args!(
            "warning: dumps not owned by their directory's owner, you or root (another user may have planted or replaced them): {}",
            untrusted.join(", ")
        ));
    }
    Ok(p)
}

/// What tells one process image from another, whichever file holds its dump: the dumps of
/// one image (a copy under another name, a periodic flush copied before the last) are one.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct ImageId {
    host: String,
    pid: u32,
    #[serde(default)]
    run_token: Option<String>,
    #[serde(default)]
    image: u32,
}

/// The fields of a dump that say which image it holds and how late it was taken; the rest
/// is skipped unread. Every dump of one image has its first call; an image that took
/// another's number (an `exec` the shim did not see, an environment the program wrote
/// itself) made its own later.
#[derive(Deserialize)]
struct Stamp {
    process: ImageId,
    start_unix_ns: u64,
    #[serde(default)]
    first_call_unix_ns: u64,
    stop_unix_ns: u64,
    complete: bool,
}

/// Which of the runs that dumps come from a report is of (`runs::run_of` tells them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// The run that started last, of the dumps found in directories: a default
    /// `gpuspy-out/` keeps every run's dumps, and a verdict of several runs merged is of
    /// none of them. Files named on the command line are always read.
    Latest,
    All,
}

/// Each file's `Stamp`, None where it cannot be read as a dump. Streamed, the rest of the
/// file skipped: the whole text is read once, by `read_dump`.
fn stamps(files: &[PathBuf]) -> Vec<Option<Stamp>> {
    files
        .iter()
        .map(|f| {
            let (file, _) = open_dump(f).ok()?;
            let reader = std::io::BufReader::new(file.take(MAX_DUMP_BYTES));
            gpuspy_format::cap::from_reader::<Stamp>(reader).ok()
        })
        .collect()
}

/// `files` less the dumps, found in directories, of runs before the latest, with their
/// stamps, and how many runs were left out. Files named and files that cannot be read as
/// dumps stay.
fn latest_run(
    files: Vec<PathBuf>,
    stamps: Vec<Option<Stamp>>,
    named: &BTreeSet<&PathBuf>,
) -> (Vec<PathBuf>, Vec<Option<Stamp>>, usize) {
    let found: Vec<usize> = (0..files.len())
        .filter(|&i| stamps[i].is_some() && !named.contains(&files[i]))
        .collect();
    let spans: Vec<Span> = found
        .iter()
        .filter_map(|&i| stamps[i].as_ref())
        .map(|s| Span {
            start_unix_ns: s.start_unix_ns,
            stop_unix_ns: s.stop_unix_ns,
            token: s.process.run_token.as_deref(),
        })
        .collect();
    let of = run_of(&spans);
    let Some(&latest) = of.iter().max() else {
        return (files, stamps, 0);
    };
    let older: BTreeSet<usize> = found
        .iter()
        .zip(&of)
        .filter(|&(_, &run)| run != latest)
        .map(|(&i, _)| i)
        .collect();
    let (files, stamps) = files
        .into_iter()
        .zip(stamps)
        .enumerate()
        .filter(|(i, _)| !older.contains(i))
        .map(|(_, kept)| kept)
        .unzip();
    (files, stamps, latest)
}

/// `files` less all but the latest dump of each process image (the one taken last, a
/// complete one on a tie, else the first named), in order, and how many were left out.
/// A file that cannot be read as a dump stays, for reading it to say why.
fn latest_of_each_image(files: Vec<PathBuf>, stamps: &[Option<Stamp>]) -> (Vec<PathBuf>, usize) {
    let mut latest: BTreeMap<(&ImageId, u64, u64), usize> = BTreeMap::new();
    for (i, stamp) in stamps.iter().enumerate() {
        let Some(s) = stamp else { continue };
        let later = |j: usize| {
            let other = stamps[j].as_ref().map(|o| (o.stop_unix_ns, o.complete));
            Some((s.stop_unix_ns, s.complete)) > other
        };
        latest
            .entry((&s.process, s.start_unix_ns, s.first_call_unix_ns))
            .and_modify(|j| {
                if later(*j) {
                    *j = i;
                }
            })
            .or_insert(i);
    }
    let kept: BTreeSet<usize> = latest.into_values().collect();
    let copies = stamps.iter().filter(|s| s.is_some()).count() - kept.len();
    let files = files
        .into_iter()
        .enumerate()
        .filter(|(i, _)| stamps[*i].is_none() || kept.contains(i))
        .map(|(_, f)| f)
        .collect();
    (files, copies)
}

/// The runs under `paths`, each once however many PATHs name it. A PATH is a run when it is
/// a dump file, or a directory with dumps in it (all processes of one run, merged). A
/// directory whose subdirectories hold the dumps is several runs, one per subdirectory.
pub fn run_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut runs = Vec::new();
    for path in paths {
        runs.extend(runs_under(path)?);
    }
    Ok(distinct(runs))
}

fn runs_under(path: &Path) -> Result<Vec<PathBuf>> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !dumps_in(path)?.is_empty() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("{}: cannot list directory", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && dumps_in(p).is_ok_and(|d| !d.is_empty()))
        .collect();
    if subdirs.is_empty() {
        bail!(
            "{}: no gpuspy dumps in this directory nor in its subdirectories",
            path.display()
        );
    }
    subdirs.sort();
    Ok(subdirs)
}

/// Expands PATHs (dump files, directories of dumps, or directories of run directories) into
/// dump files, in a stable order, each file once however many PATHs name it (`report base
/// base`, a link to a dump beside the dump).
pub fn dump_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let found = if meta.is_dir() {
            // A directory of run directories (one per node, say) is merged whole.
            let mut found = Vec::new();
            for run in runs_under(path)? {
                found.extend(dumps_in(&run)?);
            }
            found
        } else {
            vec![path.clone()]
        };
        files.extend(found);
    }
    Ok(distinct(files))
}

/// `paths` with each file or directory (device and inode) once, in order. A path that
/// vanished since it was listed keeps its place: reading it says so.
pub fn distinct(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let identity = |p: &Path| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    paths
        .into_iter()
        .filter(|p| identity(p).is_none_or(|id| seen.insert(id)))
        .collect()
}

/// `gpuspy-*.json`; temp files being written start with a dot and are skipped.
pub fn is_dump_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("gpuspy-") && n.ends_with(".json"))
}

/// Reads and parses one dump, with the metadata of the file it was read from.
///
/// Only a regular file is read: it is opened with `O_NONBLOCK`, so that opening a FIFO
/// named like a dump cannot wait for a writer, and the opened file is checked (`fstat`), so
/// that a link to `/dev/zero` or a FIFO is refused before a byte is read. The size limit
/// bounds memory: parsing costs at most a few times the file's size.
pub fn read_dump(path: &Path) -> Result<(Dump, Metadata)> {
    let cannot_read = || format!("{}: cannot read", path.display());
    let (file, meta) = open_dump(path)?;
    // The file may grow while it is read: read one byte past the limit to see that.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_DUMP_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(cannot_read)?;
    if bytes.len() as u64 > MAX_DUMP_BYTES {
        return Err(too_large(path, bytes.len() as u64));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: not JSON (not UTF-8 text)", path.display()))?;
    let dump = parse_dump(&text).map_err(|e| match foreign(&text) {
        Some(Foreign::Report) => anyhow::anyhow!(
            "{}: not a gpuspy dump: it looks like a report JSON (`gpuspy report --json` \
             output); report the dumps it was made from",
            path.display()
        ),
        _ => anyhow::anyhow!("{}: {e}", path.display()),
    })?;
    Ok((dump, meta))
}

/// What a file named like a dump holds instead of one, where it holds nothing of one: not
/// a damaged dump (truncated, malformed), which is worth an error wherever it is found.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Foreign {
    Empty,
    /// `gpuspy report --json` output: its `schema_version`, `findings` and `layers`.
    Report,
    /// A JSON object without the dump's `"schema": "gpuspy-dump"`.
    OtherJson,
}

impl Foreign {
    fn describe(self) -> &'static str {
        match self {
            Foreign::Empty => "empty",
            Foreign::Report => "a report JSON",
            Foreign::OtherJson => "JSON of another kind",
        }
    }
}

fn foreign(text: &str) -> Option<Foreign> {
    use serde::de::IgnoredAny;
    #[derive(Deserialize)]
    struct Keys {
        schema: Option<IgnoredAny>,
        schema_version: Option<IgnoredAny>,
        findings: Option<IgnoredAny>,
        layers: Option<IgnoredAny>,
    }
    if text.trim().is_empty() {
        return Some(Foreign::Empty);
    }
    let keys: Keys = serde_json::from_str(text).ok()?;
    if keys.schema.is_some() {
        return None;
    }
    let report = keys.schema_version.is_some() && keys.findings.is_some() && keys.layers.is_some();
    Some(if report {
        Foreign::Report
    } else {
        Foreign::OtherJson
    })
}

/// What the file at `path` holds instead of a dump, read again on the error path only.
fn holds_no_dump(path: &Path) -> Option<Foreign> {
    let (file, _) = open_dump(path).ok()?;
    let mut text = String::new();
    file.take(MAX_DUMP_BYTES).read_to_string(&mut text).ok()?;
    foreign(&text)
}

/// The dump file `path` opened, if it is a regular file within the size limit.
fn open_dump(path: &Path) -> Result<(std::fs::File, Metadata)> {
    let cannot_read = || format!("{}: cannot read", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(cannot_read)?;
    let meta = file.metadata().with_context(cannot_read)?;
    if !meta.is_file() {
        bail!(
            "{}: not a regular file (a FIFO, device or directory); gpuspy reads only dump files",
            path.display()
        );
    }
    if meta.len() > MAX_DUMP_BYTES {
        return Err(too_large(path, meta.len()));
    }
    Ok((file, meta))
}

fn too_large(path: &Path, size: u64) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: {} MiB, larger than a gpuspy dump can be ({} MiB)",
        path.display(),
        size >> 20,
        MAX_DUMP_BYTES >> 20
    )
}

/// Whose a dump is, as far as the reader can trust it.
enum Owner {
    /// The reader's own, or root's.
    Trusted,
    /// Another user's, in a directory of that user's (named here).
    TheirDirectory(PathBuf),
    /// Someone's other than the directory's owner, the reader or root: they could only have
    /// put it there through a directory writable by others, such as a shared `/tmp`, to
    /// plant or replace counts (docs/dump-format.md).
    Planted,
}

fn owner_of(path: &Path, meta: &Metadata) -> Owner {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() == 0 || meta.uid() == me {
        return Owner::Trusted;
    }
    match std::fs::metadata(dir) {
        Ok(d) if d.uid() == meta.uid() => Owner::TheirDirectory(dir.to_path_buf()),
        _ => Owner::Planted,
    }
}
