//! What dump writers leave in an output directory besides dumps
//! (`gpuspy_format::side_files`): temp files of writers that died while writing, which
//! `run` and `report` remove, and markers of dumps that could not be written, which `run`
//! reads to say why a process left no dump.

use crate::safe_text;
use gpuspy_format::side_files::{temp_writer, unwritten};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// This host's name, as the shim records it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Removes the temp files a dump writer of this host left in `dir` when it died while
/// writing (a SIGKILL during a write), and says so on stderr.
pub fn remove_stale_temps(dir: &Path) {
    let removed = stale_temps_removed(dir);
    if removed > 0 {
        safe_text::eprint_line(format_args!(
            "removed {removed} temp file(s) left in {} by processes that died while writing a dump",
            dir.display()
        ));
    }
}

/// Removes and counts the stale temp files in `dir`. One is removed only when all of these
/// hold, so that no live writer ever loses its file:
/// - its name says it was written on this host: a process on another host sharing the
///   directory can have any pid;
/// - no process of the pid it names exists here (`kill(pid, 0)` fails with ESRCH); while a
///   process that reused the pid lives, the file stays;
/// - nobody holds its lock: a writer holds one for as long as its file exists, so a live
///   writer whose pid this host's pid numbers do not show (another pid namespace: a
///   container with this host's name) keeps its file;
/// - it is a regular file of the user's own.
fn stale_temps_removed(dir: &Path) -> usize {
    let host = hostname();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| temp_writer(name, &host))
        else {
            continue;
        };
        if process_exists(pid) {
            continue;
        }
        // Write access, which a lock over NFS needs; never through a link, never waiting.
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        else {
            continue;
        };
        let Ok(meta) = file.metadata() else {
            continue;
        };
        // SAFETY: flock on a descriptor we own.
        let unlocked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        // The name must still be the file that was locked.
        let same = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino()));
        if meta.is_file()
            && meta.uid() == me
            && unlocked
            && same
            && std::fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Whether a process `pid` exists on this host (in this pid namespace). A pid that is not
/// a process id at all (0, or too large, which `kill` would read as a process group)
/// counts as existing, so that its file stays.
fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().filter(|&p| p > 0) else {
        return true;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let signalled = unsafe { libc::kill(pid, 0) } == 0;
    signalled || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The processes of the run `token` whose dumps could not be written to `dir`, and why
/// (`errno`, 0 where the failure had none), from the markers they left in it, which are
/// removed: pid -> errno, sorted.
pub fn take_unwritten(dir: &Path, token: &str) -> Vec<(u32, i32)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, i32)> = Vec::new();
    for entry in entries.flatten() {
        if let Some(marker) = entry.file_name().to_str().and_then(|n| unwritten(n, token)) {
            let _ = std::fs::remove_file(entry.path());
            found.push(marker);
        }
    }
    found.sort_unstable();
    found.dedup_by_key(|&mut (pid, _)| pid);
    found
}

/// Why a dump could not be written, from the errno of its marker.
pub fn unwritten_reason(errno: i32) -> String {
    match errno {
        0 => "see the shim's warning on the command's stderr".to_string(),
        libc::EFBIG => "a dump was larger than the file-size limit (ulimit -f)".to_string(),
        n => std::io::Error::from_raw_os_error(n).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuspy_format::side_files::{temp_name, unwritten_name};

    /// A pid no process has: one past the largest the kernel hands out.
    fn dead_pid() -> u32 {
        let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        max + 1
    }

    #[test]
    fn only_temp_files_of_dead_writers_on_this_host_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let host = hostname();
        let dead = dir.path().join(temp_name(&host, dead_pid(), 0));
        let live = dir.path().join(temp_name(&host, std::process::id(), 1));
        let elsewhere = dir.path().join(temp_name("another-host", dead_pid(), 2));
        let locked = dir.path().join(temp_name(&host, dead_pid(), 3));
        let not_a_temp = dir.path().join(".gpuspy-run-1.tmp");
        for path in [&dead, &live, &elsewhere, &locked, &not_a_temp] {
            std::fs::write(path, "{\"schema\"").unwrap();
        }
        // A writer in another pid namespace holds its lock.
        let holder = std::fs::File::open(&locked).unwrap();
        // SAFETY: flock on a descriptor we own.
        assert_eq!(
            unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        assert_eq!(stale_temps_removed(dir.path()), 1);
        assert!(!dead.exists());
        for kept in [&live, &elsewhere, &locked, &not_a_temp] {
            assert!(kept.exists(), "{kept:?}");
        }
        drop(holder);
        assert_eq!(stale_temps_removed(dir.path()), 1);
        assert!(!locked.exists());
    }

    #[test]
    fn markers_of_this_run_are_read_once() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            unwritten_name("tok", 7, 28),
            unwritten_name("tok", 7, 27),
            unwritten_name("tok", 9, 27),
            unwritten_name("other", 8, 28),
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        assert_eq!(take_unwritten(dir.path(), "tok"), [(7, 27), (9, 27)]);
        assert_eq!(take_unwritten(dir.path(), "tok"), []);
        assert_eq!(take_unwritten(dir.path(), "other"), [(8, 28)]);
        assert_eq!(
            unwritten_reason(libc::ENOSPC),
            "No space left on device (os error 28)"
        );
    }
}
