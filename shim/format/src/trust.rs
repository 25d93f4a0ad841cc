//! Which output directories the writer trusts, and so the reader and `gpuspy run` too.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// Why an output directory that already existed is not to be written to, or None if it may
/// be: the rule of OpenSSH's StrictModes. `link` is the path's own metadata (not following
/// a symbolic link), `dir` the directory's, `uid` the writer's effective user. A symbolic
/// link must belong to the user or root; the directory must too, and must not be writable
/// by every user unless it has the sticky bit. Otherwise another user could plant or
/// replace dumps.
pub fn untrusted_out_dir(link: &Metadata, dir: &Metadata, uid: u32) -> Option<String> {
    let trusted = |owner: u32| owner == uid || owner == 0;
    let advice = "set GPUSPY_OUT (gpuspy run -o) to a directory of your own";
    if link.file_type().is_symlink() && !trusted(link.uid()) {
        return Some(format!(
            "it is a symbolic link owned by another user (uid {}); {advice}",
            link.uid()
        ));
    }
    if !trusted(dir.uid()) {
        return Some(format!(
            "it belongs to another user (uid {}); {advice}",
            dir.uid()
        ));
    }
    let mode = dir.mode();
    (mode & 0o002 != 0 && mode & 0o1000 == 0).then(|| {
        format!(
            "every user may write to it (mode {:o}) and it has no sticky bit; {advice}",
            mode & 0o7777
        )
    })
}
