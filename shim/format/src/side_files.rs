//! The files a dump writer leaves in an output directory besides dumps and Prometheus
//! textfiles, named so that the CLI can tell whose they are: the temp file a dump is
//! written to before it is renamed over the dump, and the marker of a dump that could not
//! be written. Both start with a dot and are never read as dumps.

use crate::file_safe;

/// `.gpuspy-<pid>-<n>-<host>.tmp`: the `n`-th temp file of process `pid` on `host` (as file
/// names spell it, `file_safe`). The writer holds an exclusive `flock` on it while it
/// writes; the name says which process to ask about once nobody holds the lock.
pub fn temp_name(host: &str, pid: u32, n: u32) -> String {
    format!(".gpuspy-{pid}-{n}-{}.tmp", file_safe(host))
}

/// The pid of the process that wrote the temp file `name` on `host`, if `name` is one
/// (`temp_name`); None for any other name and for a temp file of another host.
pub fn temp_writer(name: &str, host: &str) -> Option<u32> {
    let rest = name.strip_prefix(".gpuspy-")?.strip_suffix(".tmp")?;
    let (pid, rest) = rest.split_once('-')?;
    let (n, writer_host) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(n) && writer_host == file_safe(host))
        .then(|| pid.parse().ok())
        .flatten()
}

const UNWRITTEN: &str = ".gpuspy-unwritten-";

/// `.gpuspy-unwritten-<token>-<pid>-<errno>`: an empty file that says process `pid` of the
/// run `token` (`GPUSPY_RUN_TOKEN`) could not write its dump, and why (`errno`, 0 where the
/// failure had none). Empty, so that it can be created where a dump could not be written:
/// under a file-size limit, and usually on a full file system.
pub fn unwritten_name(token: &str, pid: u32, errno: i32) -> String {
    format!("{UNWRITTEN}{token}-{pid}-{errno}")
}

/// The pid and errno of an `unwritten_name` marker of the run `token`; None for any other
/// name.
pub fn unwritten(name: &str, token: &str) -> Option<(u32, i32)> {
    let rest = name.strip_prefix(UNWRITTEN)?.strip_prefix(token)?;
    let (pid, errno) = rest.strip_prefix('-')?.split_once('-')?;
    Some((pid.parse().ok()?, errno.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_files_name_their_writer() {
        let name = temp_name("node-1/a", 4242, 7);
        assert_eq!(name, ".gpuspy-4242-7-node-1_a.tmp");
        assert_eq!(temp_writer(&name, "node-1/a"), Some(4242));
        assert_eq!(temp_writer(&name, "node-1"), None);
        for other in [
            ".gpuspy-run-4242.tmp",
            ".gpuspy-4242-x-node.tmp",
            ".gpuspy-node-4242.json.3.tmp",
            "gpuspy-4242-7-node.tmp",
            ".gpuspy-4242-7-node.json",
        ] {
            assert_eq!(temp_writer(other, "node"), None, "{other}");
        }
    }

    #[test]
    fn markers_of_unwritten_dumps_name_their_run_pid_and_errno() {
        let name = unwritten_name("ab12", 77, 28);
        assert_eq!(name, ".gpuspy-unwritten-ab12-77-28");
        assert_eq!(unwritten(&name, "ab12"), Some((77, 28)));
        assert_eq!(unwritten(&name, "ab1"), None);
        assert_eq!(unwritten(&name, "cd34"), None);
        assert_eq!(unwritten(".gpuspy-unwritten-ab12-77", "ab12"), None);
    }
}
