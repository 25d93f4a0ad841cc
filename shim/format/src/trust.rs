//! Which directories the writer trusts, and so the reader and `gpuspy run` too: the output
//! directory, the Prometheus directory and the directory `gpuspy run` preloads the shim
//! from, each with the directories above it.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Whom besides its owner a directory may let create and rename names in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// Its group, and every user where the sticky bit stops them renaming or removing
    /// others' names (`/tmp`): the dump directory, where every name is created `O_EXCL`.
    GroupOrSticky,
    /// Nobody: a directory whose names are guessable and read by others (the Prometheus
    /// directory) or loaded as code (the preload directory).
    Nobody,
}

/// Why a directory that already existed is not to be written to, or None if it may be: the
/// rule of OpenSSH's StrictModes. `link` is the path's own metadata (not following a
/// symbolic link), `dir` the directory's, `uid` the writer's effective user. A symbolic
/// link must belong to the user or root; the directory must too, and others may write to
/// it only as `writers` allows. Otherwise another user could plant or replace its files.
/// The reason is a clause for "cannot write to DIR: ..."; the caller adds what to do.
pub fn untrusted_out_dir(
    link: &Metadata,
    dir: &Metadata,
    uid: u32,
    writers: Writers,
) -> Option<String> {
    if link.file_type().is_symlink() && !trusted(link.uid(), uid) {
        return Some(format!(
            "it is a symbolic link owned by another user (uid {})",
            link.uid()
        ));
    }
    untrusted_dir(dir, uid, writers).map(|why| format!("it {why}"))
}

/// Why a directory above `dir` would let another user swap `dir` (or a directory on the
/// way to it) for one of theirs, or None: each directory from the root down to `dir`'s
/// parent must belong to the user or root and be writable by nobody else unless it has the
/// sticky bit, whoever created `dir`; each symbolic link on the way must belong to the
/// user or root. Directories that do not exist yet are skipped (whoever creates them owns
/// them); `dir` must be absolute.
pub fn untrusted_parents(dir: &Path, uid: u32) -> Option<String> {
    let mut above = PathBuf::new();
    let parents: Vec<Component> = dir.components().collect();
    for part in parents.iter().take(parents.len().saturating_sub(1)) {
        above.push(part);
        let Ok(link) = std::fs::symlink_metadata(&above) else {
            break;
        };
        if link.file_type().is_symlink() && !trusted(link.uid(), uid) {
            return Some(format!(
                "{} above it is a symbolic link owned by another user (uid {})",
                above.display(),
                link.uid()
            ));
        }
    }
    // The directories the links lead through, from the nearest one that exists.
    let mut real = dir.parent()?.to_path_buf();
    let mut real = loop {
        match std::fs::canonicalize(&real) {
            Ok(real) => break real,
            Err(_) if real.pop() => {}
            Err(_) => return None,
        }
    };
    loop {
        let meta = std::fs::metadata(&real).ok()?;
        // Above, a sticky directory every user may write is safe: nobody else may rename
        // or remove what is ours in it.
        let why = if sticky(&meta) {
            untrusted_owner(&meta, uid)
        } else {
            untrusted_dir(&meta, uid, Writers::Nobody)
        };
        if let Some(why) = why {
            return Some(format!("{} above it {why}", real.display()));
        }
        if !real.pop() {
            return None;
        }
    }
}

/// Why `dir` is not the user's or root's, or is writable by others beyond `writers`.
fn untrusted_dir(dir: &Metadata, uid: u32, writers: Writers) -> Option<String> {
    if let Some(why) = untrusted_owner(dir, uid) {
        return Some(why);
    }
    let mode = dir.mode() & 0o7777;
    match writers {
        Writers::GroupOrSticky => (mode & 0o002 != 0 && !sticky(dir))
            .then(|| format!("may be written by every user (mode {mode:o}) and has no sticky bit")),
        Writers::Nobody => {
            (mode & 0o022 != 0).then(|| format!("may be written by other users (mode {mode:o})"))
        }
    }
}

fn untrusted_owner(dir: &Metadata, uid: u32) -> Option<String> {
    (!trusted(dir.uid(), uid)).then(|| format!("belongs to another user (uid {})", dir.uid()))
}

fn trusted(owner: u32, uid: u32) -> bool {
    owner == uid || owner == 0
}

fn sticky(dir: &Metadata) -> bool {
    dir.mode() & 0o1000 != 0
}
