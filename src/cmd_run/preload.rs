//! The `LD_PRELOAD` value for the child: libgpuspy.so, whole, and nothing else of ours.
//!
//! ld.so splits `LD_PRELOAD` at spaces and colons with no way to escape either (ld.so(8)),
//! skips an entry of `PATH_MAX` bytes or more, and expands `$ORIGIN`, `$LIB` and `$PLATFORM`
//! in what is left. An install path such as `/home/a/my env/lib/libgpuspy.so` (pip users'
//! virtualenvs live under such paths) becomes `/home/a/my` and `env/lib/libgpuspy.so`, the
//! second relative to the program's working directory: a library planted there would run
//! inside the profiled program. So the shim's path goes into `LD_PRELOAD` only where ld.so
//! takes it whole. Otherwise gpuspy makes a private directory (mode 0700, a random name)
//! under `$TMPDIR` or `/tmp`, whichever has a path ld.so takes whole, puts a symlink to the
//! shim in it, preloads the symlink, and removes the directory when the child has exited.
//! Only when neither can be used does `gpuspy run` refuse, saying what to do.
//!
//! In secure mode (setuid programs) ld.so ignores every entry with a `/`: the shim is not
//! loaded there whatever the path, which the "no dump" hint already names.

use anyhow::{bail, Result};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// glibc's `SECURE_PATH_LIMIT` (`PATH_MAX`): ld.so drops an entry at least this long.
const LD_SO_PATH_LIMIT: usize = 4096;

pub struct Preload {
    /// The value for the child's `LD_PRELOAD`.
    pub value: OsString,
    /// The private directory holding the symlink, removed on drop.
    _dir: Option<tempfile::TempDir>,
}

/// Whether ld.so loads `path` as one absolute file name when it is an `LD_PRELOAD` entry.
pub fn taken_whole(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    path.is_absolute()
        && bytes.len() < LD_SO_PATH_LIMIT
        && !bytes.iter().any(|b| matches!(b, b' ' | b':' | b'$'))
}

/// `LD_PRELOAD` for the child: the shim first, then whatever the user had preloaded.
pub fn preload(shim: &Path, existing: Option<&OsStr>) -> Result<Preload> {
    let candidates: Vec<PathBuf> = std::env::var_os("TMPDIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/tmp")])
        .collect();
    let (path, dir) = safe_path(shim, &candidates)?;
    let mut value = path.into_os_string();
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    Ok(Preload { value, _dir: dir })
}

/// The shim's own path if ld.so takes it whole, else a symlink to it in a new private
/// directory under the first of `candidates` where that works.
fn safe_path(shim: &Path, candidates: &[PathBuf]) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    if taken_whole(shim) {
        return Ok((shim.to_path_buf(), None));
    }
    let mut why = Vec::new();
    for base in candidates {
        if !taken_whole(base) {
            why.push(format!("{}: has a space, colon or $ too", base.display()));
            continue;
        }
        // Mode 0700 and a random name of letters and digits.
        let made = tempfile::Builder::new()
            .prefix("gpuspy-preload-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)
            .and_then(|dir| {
                let link = dir.path().join("libgpuspy.so");
                std::os::unix::fs::symlink(shim, &link).map(|()| (link, dir))
            });
        match made {
            Ok((link, dir)) if taken_whole(&link) => return Ok((link, Some(dir))),
            Ok((link, _)) => why.push(format!("{}: not usable by ld.so", link.display())),
            Err(e) => why.push(format!("{}: {e}", base.display())),
        }
    }
    bail!(
        "cannot preload {}: ld.so splits LD_PRELOAD at spaces and colons (and expands $), and \
         no private directory for a link to it could be made ({}); install gpuspy under a path \
         without spaces, colons or $, or set TMPDIR to a writable directory whose path has none",
        shim.display(),
        why.join("; ")
    )
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
    fn an_unsafe_shim_path_goes_through_a_private_link_or_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let spaced = root.path().join("my space");
        std::fs::create_dir(&spaced).unwrap();
        let shim = spaced.join("libgpuspy.so");
        std::fs::write(&shim, b"").unwrap();
        let bad_base = root.path().join("tmp:dir");
        std::fs::create_dir(&bad_base).unwrap();
        let (link, dir) = safe_path(&shim, &[bad_base.clone(), root.path().into()]).unwrap();
        let dir = dir.unwrap();
        assert!(
            taken_whole(&link) && link.starts_with(dir.path()),
            "{link:?}"
        );
        assert_eq!(std::fs::read_link(&link).unwrap(), shim);
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let private = dir.path().to_path_buf();
        drop(dir);
        assert!(!private.exists(), "the private directory is removed");

        // No usable directory: refused, saying what to do.
        let e = safe_path(&shim, &[bad_base, root.path().join("missing")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("install gpuspy under a path without spaces"),
            "{e}"
        );
        assert!(e.contains("tmp:dir: has a space, colon or $ too"), "{e}");
    }
}
