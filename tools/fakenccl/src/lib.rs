//! A fake `libnccl.so.2` for testing gpuspy without GPUs. Like the real library it exports
//! every function twice: `ncclX`, which calls `pncclX` directly, and the strong alias
//! `pncclX` that profilers forward to. Every call succeeds; communicators are distinct
//! heap addresses. Nothing is communicated.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};

type Ptr = *mut c_void;
type NcclResult = c_int;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId([u8; 128]);

fn new_comm(out: *mut Ptr) -> NcclResult {
    if out.is_null() {
        return 4; // ncclInvalidArgument
    }
    // SAFETY: the caller's out-pointer; a leaked allocation gives a distinct handle.
    unsafe { *out = Box::into_raw(Box::new(0u64)).cast() };
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
    ncclCommInitRank / pncclCommInitRank(comm: *mut Ptr, _nranks: c_int, _id: UniqueId, _rank: c_int) {
        new_comm(comm)
    }
    ncclCommInitRankConfig / pncclCommInitRankConfig(comm: *mut Ptr, _nranks: c_int, _id: UniqueId, _rank: c_int, _config: Ptr) {
        new_comm(comm)
    }
    ncclCommSplit / pncclCommSplit(_comm: Ptr, _color: c_int, _key: c_int, newcomm: *mut Ptr, _config: Ptr) {
        new_comm(newcomm)
    }
    ncclCommDestroy / pncclCommDestroy(_comm: Ptr) { 0 }
    ncclCommAbort / pncclCommAbort(_comm: Ptr) { 0 }
    ncclAllReduce / pncclAllReduce(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _op: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclBroadcast / pncclBroadcast(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _root: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclReduce / pncclReduce(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _op: c_int, _root: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclAllGather / pncclAllGather(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclReduceScatter / pncclReduceScatter(_s: Ptr, _r: Ptr, _n: usize, _dt: c_int, _op: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclSend / pncclSend(_s: Ptr, _n: usize, _dt: c_int, _peer: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclRecv / pncclRecv(_r: Ptr, _n: usize, _dt: c_int, _peer: c_int, _comm: Ptr, _stream: Ptr) { 0 }
    ncclGroupStart / pncclGroupStart() { 0 }
    ncclGroupEnd / pncclGroupEnd() { 0 }
}
