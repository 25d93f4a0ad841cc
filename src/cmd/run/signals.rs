//! Signals that reach `gpuspy run` while its child runs.
//!
//! gpuspy stands between a shell (or a batch system) and the profiled program, so signals
//! meant for the job reach gpuspy. Each must reach the child exactly once: a job killed
//! through gpuspy's pid must not run on orphaned, and a program that gets one Ctrl-C twice
//! (a second KeyboardInterrupt in Python) can have its atexit handlers, and with them its
//! dump, cut short.
//!
//! The rule, per signal gpuspy receives:
//! - SIGTERM: forwarded to the child.
//! - SIGINT: forwarded, except when the terminal sent it (Ctrl-C: `si_code` is `SI_KERNEL`
//!   and the line discipline signals the whole foreground process group) while the child is
//!   still in gpuspy's process group, where it got its own copy.
//! - SIGHUP: forwarded, except when the kernel sent it to the whole foreground group (the
//!   terminal's session leader went away: `SI_KERNEL`, gpuspy not a session leader) with the
//!   child in gpuspy's group. A hangup signals only the session leader, so when gpuspy leads
//!   its session, that SIGHUP is forwarded.
//!
//! A signal sent with kill(2) (`SI_USER`) is always forwarded: `kill -INT PID` and
//! `kill -INT -PGID` carry the same `siginfo`, so a group-wide kill(2) reaches the child
//! twice; send it to gpuspy's pid (or the child's) alone. A signal that was ignored when
//! gpuspy started (`nohup`'s SIGHUP, a background job's SIGINT) stays ignored and is not
//! forwarded: the child inherits it, as it would without gpuspy.
//!
//! The handler only writes `(signal, si_code)` to a non-blocking pipe (write(2) is
//! async-signal-safe). The waiting loop polls that pipe and a pidfd of the child (readable
//! when it exits), forwards, and is the only place the child is reaped: a forwarded signal
//! can only hit the child itself or its zombie, never a process that reused its pid.

use anyhow::{Context, Result};
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

const FORWARDED: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
const RECORD: usize = 8;

/// The pipe's write end, for the handler; -1 when no forwarder is installed.
static PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
    // SAFETY: errno is this thread's; saved and restored so the interrupted code sees its own.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t.
    let code = unsafe { info.as_ref() }.map_or(0, |i| i.si_code);
    let mut record = [0u8; RECORD];
    record[..4].copy_from_slice(&sig.to_ne_bytes());
    record[4..].copy_from_slice(&code.to_ne_bytes());
    let fd = PIPE.load(SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; 8 bytes, under PIPE_BUF, arrive whole. A full
        // pipe (thousands of signals unread) drops the record rather than block.
        unsafe { libc::write(fd, record.as_ptr().cast(), RECORD) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

pub struct Forwarder {
    read: OwnedFd,
    _write: OwnedFd,
    /// The signals given our handler, with the actions to restore.
    previous: Vec<(c_int, libc::sigaction)>,
}

impl Forwarder {
    /// Installs the handlers; before the child is spawned, so that no signal is missed.
    pub fn install() -> Result<Forwarder> {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error()).context("cannot create a pipe");
        }
        // SAFETY: pipe2 just returned these two descriptors; nothing else owns them.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        PIPE.store(write.as_raw_fd(), SeqCst);
        let mut forwarder = Forwarder {
            read,
            _write: write,
            previous: Vec::new(),
        };
        for sig in FORWARDED {
            // SAFETY: sigaction is plain data; all zeroes is a valid (default) action.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a null new action only reads the current one into `old`.
            unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            // SAFETY: as above.
            let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
            let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = on_signal;
            new.sa_sigaction = handler as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            // SAFETY: `new` is a valid action whose handler only does async-signal-safe work.
            if unsafe { libc::sigaction(sig, &new, &mut old) } != 0 {
                return Err(std::io::Error::last_os_error()).context("cannot handle signals");
            }
            forwarder.previous.push((sig, old));
        }
        Ok(forwarder)
    }

    /// Waits for the child, forwarding signals meanwhile. Returns its status and the first
    /// forwarded-kind signal gpuspy itself received, if any.
    pub fn wait(&self, mut child: Child) -> Result<(ExitStatus, Option<c_int>)> {
        let pid = child.id() as libc::pid_t;
        let pidfd = pidfd_open(pid);
        let mut first = None;
        loop {
            if let Some(status) = child.try_wait().context("cannot wait for the command")? {
                return Ok((status, first));
            }
            let mut fds = [
                libc::pollfd {
                    fd: self.read.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: pidfd.as_ref().map_or(-1, |f| f.as_raw_fd()),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // With a pidfd the child's exit wakes the poll; without one (Linux before 5.3),
            // look again every 100 ms.
            let timeout = if pidfd.is_some() { -1 } else { 100 };
            // SAFETY: fds is a valid array of two pollfd; a negative fd is ignored.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) } < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e).context("cannot wait for the command");
                }
            }
            for (sig, code) in self.drain() {
                first.get_or_insert(sig);
                if !reached_the_child_too(sig, code, pid) {
                    // SAFETY: kill has no memory preconditions; the child is not reaped yet
                    // (only this loop reaps it), so `pid` is still the child.
                    unsafe { libc::kill(pid, sig) };
                }
            }
        }
    }

    /// The signals recorded since the last call, in the order they were handled.
    fn drain(&self) -> Vec<(c_int, c_int)> {
        let mut records = Vec::new();
        let mut buf = [0u8; RECORD * 64];
        loop {
            // SAFETY: reading into a buffer of the size given.
            let n =
                unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return records;
            }
            // Writes of RECORD bytes are atomic and reads take multiples of them.
            for r in buf[..n as usize].chunks_exact(RECORD) {
                let sig = c_int::from_ne_bytes([r[0], r[1], r[2], r[3]]);
                let code = c_int::from_ne_bytes([r[4], r[5], r[6], r[7]]);
                records.push((sig, code));
            }
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: restoring the action sigaction gave us.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
        PIPE.store(-1, SeqCst);
    }
}

/// Whether the kernel sent `sig` to a whole process group that the child shares with
/// gpuspy, so that the child already has its own copy (the module doc has the rule).
fn reached_the_child_too(sig: c_int, code: c_int, child: libc::pid_t) -> bool {
    if code != libc::SI_KERNEL {
        return false;
    }
    // SAFETY: getsid, getpid, getpgid and getpgrp have no preconditions.
    let group_wide = match sig {
        libc::SIGINT => true,
        libc::SIGHUP => unsafe { libc::getsid(0) != libc::getpid() },
        _ => false,
    };
    group_wide && unsafe { libc::getpgid(child) == libc::getpgrp() }
}

/// A descriptor that becomes readable when `pid` exits; None before Linux 5.3.
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a new descriptor that we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as c_int) })
}
