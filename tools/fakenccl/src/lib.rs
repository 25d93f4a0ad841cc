//! A fake `libnccl.so.2` for testing gpuspy without GPUs. Like the real library it exports
//! every function twice: `ncclX`, which calls `pncclX` directly, and the strong alias
//! `pncclX` that profilers forward to. Every call succeeds; communicators are distinct
//! heap addresses. Nothing is communicated.
//!
//! `FAKENCCL_RENDEZVOUS=DIR` makes collectives wait for their peers, as real ones do:
//! the n-th collective of rank r on a communicator creates `DIR/<n>.<r>` and returns only
//! once every rank of the communicator has created its `DIR/<n>.*` (one communicator per
//! directory). A rank that never enters the collective leaves the others waiting forever.
//!
//! `FAKENCCL_DELAY_NS=N` makes every collective (not `ncclSend`, `ncclRecv`, group calls)
//! take at least N ns on the host, as one does that waits for a late peer.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

type Ptr = *mut c_void;
type NcclResult = c_int;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId([u8; 128]);

/// What a communicator handle points to.
struct Comm {
    rank: c_int,
    /// -1 where not known (a split).
    nranks: c_int,
    collectives: AtomicU64,
}

fn new_comm(out: *mut Ptr, rank: c_int, nranks: c_int) -> NcclResult {
    if out.is_null() {
        return 4; // ncclInvalidArgument
    }
    let comm = Comm {
        rank,
        nranks,
        collectives: AtomicU64::new(0),
    };
    // SAFETY: the caller's out-pointer; a leaked allocation gives a distinct handle.
    unsafe { *out = Box::into_raw(Box::new(comm)).cast() };
    0
}

/// A collective on `comm`: with `FAKENCCL_RENDEZVOUS`, waits for every rank to enter it.
unsafe fn collective(comm: Ptr) -> NcclResult {
    // SAFETY: handles come from new_comm.
    let Some(comm) = (unsafe { comm.cast::<Comm>().as_ref() }) else {
        return 4;
    };
    let n = comm.collectives.fetch_add(1, Ordering::Relaxed);
    if let Some(ns) = std::env::var("FAKENCCL_DELAY_NS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_nanos(ns));
    }
    let Some(dir) = std::env::var_os("FAKENCCL_RENDEZVOUS").map(PathBuf::from) else {
        return 0;
    };
    if comm.nranks < 2 || std::fs::write(dir.join(format!("{n}.{}", comm.rank)), b"").is_err() {
        return 0;
    }
    while !(0..comm.nranks).all(|r| dir.join(format!("{n}.{r}")).exists()) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    0
}

/// Defines `pncclX` with the given body and `ncclX` calling it.
macro_rules! nccl {
    ($($name:ident / $pname:ident ($($arg:ident : $ty:ty),*) $body:block)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $pname($($arg: $ty),*) -> NcclResult $body
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> NcclResult {
                $pname($($arg),*)
            }
        )*
    };
}

nccl! {
    ncclGetUniqueId / pncclGetUniqueId(id: *mut UniqueId) {
        if !id.is_null() {
            *id = UniqueId([0x5a; 128]);
        }
        0
    }
    ncclCommInitRank / pncclCommInitRank(comm: *mut Ptr, nranks: c_int, _id: UniqueId, rank: c_int) {
        new_comm(comm, rank, nranks)
    }
    ncclCommInitRankConfig / pncclCommInitRankConfig(comm: *mut Ptr, nranks: c_int, _id: UniqueId, rank: c_int, _config: Ptr) {
        new_comm(comm, rank, nranks)
    }
    ncclCommSplit / pncclCommSplit(_comm: Ptr, _color: c_int, key: c_int, newcomm: *mut Ptr, _config: Ptr) {
        new_comm(newcomm, key, -1)
    }
    ncclCommDestroy / pncclCommDestroy(_comm: Ptr) { 0 }
    ncclCommAbort / pncclCommAbort(_comm: Ptr) { 0 }
    ncclAllReduce / pncclAllReduce(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _op: c_int, comm: Ptr, _stream: Ptr) { collective(comm) }
    ncclBroadcast / pncclBroadcast(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _root: c_int, comm: Ptr, _stream: Ptr) { collective(comm) }
    ncclReduce / pncclReduce(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _op: c_int, _root: c_int, comm: Ptr, _stream: Ptr) { collective(comm) }
    ncclAllGather / pncclAllGather(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, comm: Ptr, _stream: Ptr) { collective(comm) }
    ncclReduceScatter / pncclReduceScatter(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _op: c_int, comm: Ptr, _stream: Ptr) { collective(comm) }
    ncclSend / pncclSend(_s: Ptr, _n: usize, _dt: c_int, _peer: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclRecv / pncclRecv(_r: Ptr, _n: usize, _dt: c_int, _peer: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclGroupStart / pncclGroupStart() { 0 }
    ncclGroupEnd / pncclGroupEnd() { 0 }
}
