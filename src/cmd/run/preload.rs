//! The `LD_PRELOAD` value for the child: libgpuspy.so, whole, and nothing else of ours.
//!
//! ld.so splits `LD_PRELOAD` at spaces and colons with no way to escape either (ld.so(8)),
//! skips an entry of `PATH_MAX` bytes or more, and expands `$ORIGIN`, `$LIB` and `$PLATFORM`
//! in what is left. An install path such as `/home/a/my env/lib/libgpuspy.so` (pip users'
//! virtualenvs live under such paths) becomes `/home/a/my` and `env/lib/libgpuspy.so`, the
//! second relative to the program's working directory: a library planted there would run
//! inside the profiled program. So the shim's path goes into `LD_PRELOAD` only where ld.so
//! takes it whole. Otherwise gpuspy preloads a symbolic link to the shim in a directory of
//! the user's own that no other user can create names in: `$XDG_RUNTIME_DIR/gpuspy`, else
//! `$XDG_CACHE_HOME/gpuspy` or `~/.cache/gpuspy`, else `$TMPDIR/gpuspy-<uid>` or
//! `/tmp/gpuspy-<uid>`, the first whose path ld.so takes whole and that passes the
//! writer's trust rules (`gpuspy_format::trust`): mode 0700, the user's, and every directory
//! above it the user's or root's and writable by no one else unless sticky. The link is
//! named after the shim's path and never removed: processes the job leaves behind keep its
//! `LD_PRELOAD`, and a name that vanished could be re-created by someone else. Only when
//! no place can be used does `gpuspy run` refuse, saying what to do.
//!
//! In secure mode (setuid programs) ld.so ignores every entry with a `/`: the shim is not
//! loaded there whatever the path, which the "no dump" hint already names.

use anyhow::{bail, Result};
use gpuspy_format::trust::{self, Writers};
use std::ffi::{OsStr, OsString};
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// glibc's `SECURE_PATH_LIMIT` (`PATH_MAX`): ld.so drops an entry at least this long.
const LD_SO_PATH_LIMIT: usize = 4096;

/// Whether ld.so loads `path` as one absolute file name when it is an `LD_PRELOAD` entry.
pub fn taken_whole(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    path.is_absolute()
        && bytes.len() < LD_SO_PATH_LIMIT
        && !bytes.iter().any(|b| matches!(b, b' ' | b':' | b'$'))
}

/// `LD_PRELOAD` for the child: the shim first, then whatever the user had preloaded.
pub fn preload(shim: &Path, existing: Option<&OsStr>) -> Result<OsString> {
    let mut value = safe_path(shim, &private_dirs())?.into_os_string();
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    Ok(value)
}

/// The user's own directories for the link, best first.
fn private_dirs() -> Vec<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|d| d.is_absolute())
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|home| home.join(".cache")));
    let tmp = var("TMPDIR").unwrap_or_else(|| PathBuf::from("/tmp"));
    [var("XDG_RUNTIME_DIR"), cache]
        .into_iter()
        .flatten()
        .map(|base| base.join("gpuspy"))
        .chain([tmp.join(format!("gpuspy-{uid}"))])
        .collect()
}

/// The shim's own path if ld.so takes it whole, else a link to it in the first of `dirs`
/// where that works.
fn safe_path(shim: &Path, dirs: &[PathBuf]) -> Result<PathBuf> {
    if taken_whole(shim) {
        return Ok(shim.to_path_buf());
    }
    // One name per shim path: every job run from this install shares the link.
    let mut hasher = std::hash::DefaultHasher::new();
    shim.hash(&mut hasher);
    let name = format!("libgpuspy-{:016x}.so", hasher.finish());
    let mut why = Vec::new();
    for dir in dirs {
        let link = dir.join(&name);
        if !taken_whole(&link) {
            why.push(format!("{}: has a space, colon or $ too", dir.display()));
            continue;
        }
        match private_dir(dir).and_then(|()| linked(shim, &link)) {
            Ok(()) => return Ok(link),
            Err(e) => why.push(format!("{}: {e}", dir.display())),
        }
    }
    bail!(
        "cannot preload {}: ld.so splits LD_PRELOAD at spaces and colons (and expands $), and \
         no private directory for a link to it could be used ({}); install gpuspy under a \
         path without spaces, colons or $, or set XDG_RUNTIME_DIR or TMPDIR to a directory \
         of your own whose path has none",
        shim.display(),
        why.join("; ")
    )
}

/// Creates `dir` (mode 0700) if need be and vets it and every directory above it: no other
/// user may create or swap names in it.
fn private_dir(dir: &Path) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // Before anything is made there.
    if let Some(why) = trust::untrusted_parents(dir, me) {
        return Err(why);
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create it: {e}"))?;
    let link = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    match trust::untrusted_out_dir(&link, &meta, me, Writers::Nobody) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Makes `link` a symbolic link to `shim`, unless it already is one: a new link is made
/// under a temp name and renamed into place, so `link` always names a shim.
fn linked(shim: &Path, link: &Path) -> Result<(), String> {
    if std::fs::read_link(link).is_ok_and(|target| target == shim) {
        return Ok(());
    }
    let tmp = link.with_extension(format!("{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(shim, &tmp)
        .and_then(|()| std::fs::rename(&tmp, link))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot link the shim there: {e}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_ld_so_would_split_or_expand_are_not_taken_whole() {
        assert!(taken_whole(Path::new("/opt/gpuspy/lib/libgpuspy.so")));
        for bad in [
            "/x/my space/libgpuspy.so",
            "/x/a:b/libgpuspy.so",
            "/x/$LIB/libgpuspy.so",
            "relative/libgpuspy.so",
        ] {
            assert!(!taken_whole(Path::new(bad)), "{bad}");
        }
        let long = format!("/{}/libgpuspy.so", "d".repeat(LD_SO_PATH_LIMIT));
        assert!(!taken_whole(Path::new(&long)));
    }

    #[test]
    fn an_unsafe_shim_path_goes_through_a_lasting_private_link_or_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let spaced = root.path().join("my space");
        std::fs::create_dir(&spaced).unwrap();
        let shim = spaced.join("libgpuspy.so");
        std::fs::write(&shim, b"").unwrap();
        let bad_base = root.path().join("tmp:dir/gpuspy");
        // Every user may write here: refused though sticky, as is what lies below.
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let below_open = open.join("gpuspy");
        let private = root.path().join("private/gpuspy");
        let dirs = [bad_base.clone(), below_open.clone(), private.clone()];
        let link = safe_path(&shim, &dirs).unwrap();
        assert!(taken_whole(&link) && link.starts_with(&private), "{link:?}");
        assert_eq!(std::fs::read_link(&link).unwrap(), shim);
        let mode = std::fs::metadata(&private).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(
            !below_open.exists(),
            "nothing made under a directory others may write"
        );
        // The same link for the next job, and it lasts: nothing removes it.
        assert_eq!(safe_path(&shim, &dirs).unwrap(), link);
        assert_eq!(std::fs::read_dir(&private).unwrap().count(), 1);

        // No usable directory: refused, saying what to do.
        let e = safe_path(&shim, &[bad_base, below_open])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("install gpuspy under a path without spaces"),
            "{e}"
        );
        assert!(
            e.contains("tmp:dir/gpuspy: has a space, colon or $ too"),
            "{e}"
        );
        assert!(
            e.contains(&format!(
                "{}: {} above it may be written by other users (mode 777)",
                open.join("gpuspy").display(),
                open.display()
            )),
            "{e}"
        );
    }
}
