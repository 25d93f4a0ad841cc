//! Every file the CLI writes (`--json FILE`, `--html`, `--perfetto`, `--junit`,
//! `--markdown`, the Prometheus finding of `run --prom`, the manual pages) is written to a
//! new temp file beside it and renamed over it once written whole, so that a write that
//! fails (a full disk, `ulimit -f`, no memory left) leaves the file as it was, never empty
//! or cut short, and leaves no temp file either.

use anyhow::{Context, Result};
use std::fs::Permissions;
use std::io::{BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Writes `path` through `render`; an error names the file, in one line.
///
/// The temp file is `.<name>.<random>.tmp` in the same directory, created with `O_EXCL`
/// (never following a link planted at its name) with the permissions of the file it
/// replaces, or for a new file those the umask leaves of 0666. What is already at `path`
/// is followed or written to only when it belongs to the user or root, as the kernel's
/// `protected_symlinks` rule has it: such a link is followed to its target, which is
/// replaced, so the link stays; such a FIFO or device (`/dev/stdout`, a shell's `>(...)`)
/// is written in place, opened without blocking, so that a FIFO nobody reads is an error
/// rather than a hang. Anything else at `path` is replaced, never written through: in a
/// shared sticky directory such as `/tmp`, replacing another user's file fails.
pub fn write(path: &Path, render: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let cannot = || format!("{}: cannot write", path.display());
    match Target::of(path).with_context(cannot)? {
        Target::InPlace => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .with_context(cannot)?;
            blocking(&file).with_context(cannot)?;
            let mut w = BufWriter::new(file);
            render(&mut w)
                .and_then(|()| w.flush().map_err(Into::into))
                .with_context(cannot)
        }
        Target::Replace { file, mode } => {
            let mut tmp = temp_beside(&file, mode).with_context(cannot)?;
            let mut w = BufWriter::new(tmp.as_file_mut());
            render(&mut w)
                .and_then(|()| w.flush().map_err(Into::into))
                .with_context(cannot)?;
            drop(w);
            // On failure the temp file is dropped, which removes it.
            tmp.persist(&file)
                .map_err(|e| e.error)
                .with_context(cannot)?;
            Ok(())
        }
    }
}

/// Fails as `write` would fail to start writing `path` (its directory missing or not
/// writable), without touching `path`: for a file written only when a long job ends.
pub fn check(path: &Path) -> Result<()> {
    let cannot = || format!("{}: cannot write", path.display());
    if let Target::Replace { file, mode } = Target::of(path).with_context(cannot)? {
        temp_beside(&file, mode).with_context(cannot)?;
    }
    Ok(())
}

enum Target {
    /// A FIFO or device: written in place.
    InPlace,
    /// A regular file, or none yet: `file` is replaced, with `mode` if it had one.
    Replace { file: PathBuf, mode: Option<u32> },
}

impl Target {
    fn of(path: &Path) -> std::io::Result<Target> {
        let replace = |mode| Target::Replace {
            file: path.to_path_buf(),
            mode,
        };
        let link = match std::fs::symlink_metadata(path) {
            Ok(link) => link,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(replace(None)),
            Err(e) => return Err(e),
        };
        // SAFETY: geteuid has no preconditions.
        let mine = |owner: u32| owner == 0 || owner == unsafe { libc::geteuid() };
        if !mine(link.uid()) {
            return Ok(replace(None));
        }
        let meta = if link.file_type().is_symlink() {
            match std::fs::metadata(path) {
                Ok(meta) if mine(meta.uid()) => meta,
                // Dangling, or someone else's: the link itself is replaced.
                _ => return Ok(replace(None)),
            }
        } else {
            link
        };
        let kind = meta.file_type();
        if kind.is_fifo() || kind.is_char_device() || kind.is_block_device() {
            return Ok(Target::InPlace);
        }
        Ok(Target::Replace {
            file: std::fs::canonicalize(path)?,
            mode: Some(meta.permissions().mode() & 0o7777),
        })
    }
}

fn temp_beside(file: &Path, mode: Option<u32>) -> std::io::Result<tempfile::NamedTempFile> {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    // Opened here rather than by tempfile, whose errors name the random temp path.
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .make_in(dir, |path| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(path)
        })?;
    if let Some(mode) = mode {
        // Not subject to the umask, unlike the mode it was created with.
        tmp.as_file()
            .set_permissions(Permissions::from_mode(mode))?;
    }
    Ok(tmp)
}

/// Clears `O_NONBLOCK`, set to open a FIFO without waiting for a reader, so that writes
/// wait for a slow reader instead of failing.
fn blocking(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with flags it just returned.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if cleared {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_failed_write_leaves_the_file_as_it_was_and_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.html");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, Permissions::from_mode(0o640)).unwrap();
        let failed = write(&file, |w| {
            w.write_all(b"half")?;
            anyhow::bail!("out of memory")
        });
        assert_eq!(
            format!("{:#}", failed.unwrap_err()),
            format!("{}: cannot write: out of memory", file.display())
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old");
        assert_eq!(entries(dir.path()), ["report.html"]);
        write(&file, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o640, "the replaced file's permissions");
        assert_eq!(entries(dir.path()), ["report.html"]);
    }

    #[test]
    fn a_link_keeps_pointing_at_the_file_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write(&link, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(entries(dir.path()), ["link.json", "target.json"]);
    }

    #[test]
    fn a_device_is_written_in_place_and_a_fifo_nobody_reads_is_an_error() {
        write(Path::new("/dev/null"), |w| Ok(w.write_all(b"x")?)).unwrap();
        check(Path::new("/dev/null")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let err = write(&fifo, |w| Ok(w.write_all(b"x")?)).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "{}: cannot write: No such device or address (os error 6)",
                fifo.display()
            )
        );
    }

    #[test]
    fn a_directory_that_cannot_take_the_file_is_refused_up_front() {
        let err = check(Path::new("/nonexistent-dir/report.json")).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "/nonexistent-dir/report.json: cannot write: No such file or directory (os error 2)"
        );
        let dir = tempfile::tempdir().unwrap();
        check(&dir.path().join("new.json")).unwrap();
        assert!(entries(dir.path()).is_empty());
    }
}
