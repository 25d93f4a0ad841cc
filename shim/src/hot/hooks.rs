//! The hook list: one line per exported driver or NCCL symbol that gpuspy wraps, every
//! variant spelled as the library exports it (`_v2`, `_ptsz`, `_ptds`), so the names grep
//! against `cuda.h` and `nccl.h`. `hook_list!` hands the list to the macros that make the
//! `Hook` id enum and the name table (here), one exported `extern "C"` wrapper per line
//! (`exports.rs`) and the table of wrapper addresses (`doors.rs`). Each section names the
//! library's result type (`CUresult`, `ncclResult_t`) and what a wrapper returns when the
//! loaded library lacks the symbol.
//!
//! The expression after `=>` is evaluated from the call's arguments (by name) before the
//! call: it may act at once (NCCL counts an operation when it is issued) and yields the
//! `Effect` the recorder applies after a successful return (see `effect.rs`). An NCCL line
//! may add `then ...`, also built before the call and handed the result after it.
//!
//! Adding a hook: one line here, one line in tools/fakecuda (its export and its version
//! in the table; tests/doors.rs `every_hook_resolves_through_every_door` fails until both
//! are there), one test row.
//! Signatures follow cuda.h; handles are `Ptr`, `CUdeviceptr` is `Dptr`. Legacy exports
//! without a `_v2` suffix take 32-bit device pointers and sizes (`Dptr32`, `u32`).

use std::ffi::{c_int, c_void};

impl Hook {
    /// Whether the call waits for the GPU (or for other ranks), however long that takes:
    /// a switch of CUPTI's state does not wait for it to end (`record::with_calls_held`).
    pub fn waits(self) -> bool {
        self.is_nccl()
            || matches!(
                self,
                Hook::cuStreamSynchronize
                    | Hook::cuStreamSynchronize_ptsz
                    | Hook::cuCtxSynchronize
                    | Hook::cuCtxSynchronize_v2
                    | Hook::cuEventSynchronize
            )
    }
}

pub type CUresult = u32;
pub type Ptr = *mut c_void;
pub type Dptr = u64;
pub type Dptr32 = u32;
pub type Size = usize;

/// `CUmemLocation`, passed by value (8 bytes, one integer register).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemLocation {
    pub kind: c_int,
    pub id: c_int,
}

/// Returned by a wrapper whose driver lacks the symbol, where the program would otherwise
/// have died on an unresolved symbol.
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;

/// The integer a wrapped library returns, as the recorder keeps it: zero is success, any
/// other value is counted as an error code.
pub trait ResultCode: Copy {
    fn code(self) -> u32;
}
impl ResultCode for CUresult {
    #[inline(always)]
    fn code(self) -> u32 {
        self
    }
}
impl ResultCode for c_int {
    #[inline(always)]
    fn code(self) -> u32 {
        self as u32
    }
}

/// What a wrapper does with the result after the call and the recording, independent of
/// whether it is recorded. Built from the arguments before the call; `()` does nothing and
/// compiles to nothing.
pub trait Then<R> {
    fn then(self, result: R);
}
impl<R> Then<R> for () {
    #[inline(always)]
    fn then(self, _: R) {}
}

/// The ids, names and kinds of the hooks, from the list.
macro_rules! hook_ids {
    (
        driver -> $dres:ty, else $dmissing:expr; {
            $( $name:ident ( $($arg:ident : $ty:ty),* ) => $effect:expr; )*
        }
        nccl -> $nres:ty, else $nmissing:expr; {
            $( $nname:ident ( $($narg:ident : $nty:ty),* ) => $neffect:expr $(, then $nthen:expr)?; )*
        }
        manual { $( $mname:ident => $($mpath:ident)::+; )* }
    ) => {
        /// One id per wrapped exported symbol.
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u16)]
        pub enum Hook { $($name,)* $($nname,)* $($mname,)* }

        pub const HOOK_COUNT: usize =
            [$(stringify!($name),)* $(stringify!($nname),)* $(stringify!($mname),)*].len();

        /// NUL-terminated so the table can be handed to `dlsym` as is.
        pub static HOOK_NAMES: [&str; HOOK_COUNT] = [
            $(concat!(stringify!($name), "\0"),)*
            $(concat!(stringify!($nname), "\0"),)*
            $(concat!(stringify!($mname), "\0"),)*
        ];

        pub const ALL_HOOKS: [Hook; HOOK_COUNT] =
            [$(Hook::$name,)* $(Hook::$nname,)* $(Hook::$mname,)*];

        impl Hook {
            /// Whether this hook wraps NCCL rather than the driver.
            pub fn is_nccl(self) -> bool {
                matches!(self, $(Hook::$nname)|*)
            }
        }
    };
}

/// The hook list, handed to the macro `$expand`: `hook_ids` below makes the ids and names,
/// `exports.rs` the wrappers, `doors.rs` the table of wrapper addresses. The effects and
/// the hand-written wrappers' paths are resolved where the list is expanded, so this
/// module needs neither the recorder nor the wrappers.
macro_rules! hook_list {
    ($expand:ident) => {
        $expand! {
// The driver: resolved against libcuda's export of the same name.
driver -> CUresult, else CUDA_ERROR_NOT_FOUND; {
    // Init, contexts.
    cuInit(flags: c_uint) => Effect::DriverReady;
    cuCtxCreate(pctx: Ptr, flags: c_uint, dev: c_int) => Effect::UsesDevice(dev);
    cuCtxCreate_v2(pctx: Ptr, flags: c_uint, dev: c_int) => Effect::UsesDevice(dev);
    cuCtxCreate_v3(pctx: Ptr, params: Ptr, n: c_int, flags: c_uint, dev: c_int) => Effect::UsesDevice(dev);
    cuCtxCreate_v4(pctx: Ptr, params: Ptr, flags: c_uint, dev: c_int) => Effect::UsesDevice(dev);
    cuCtxDestroy_v2(ctx: Ptr) => Effect::None;
    cuDevicePrimaryCtxRetain(pctx: Ptr, dev: c_int) => Effect::UsesDevice(dev);
    cuDevicePrimaryCtxRelease_v2(dev: c_int) => Effect::None;

    // Modules, libraries, JIT and linking.
    cuModuleLoad(module: Ptr, fname: *const c_char) => Effect::None;
    cuModuleLoadData(module: Ptr, image: Ptr) => Effect::None;
    cuModuleLoadDataEx(module: Ptr, image: Ptr, n: c_uint, opts: Ptr, vals: Ptr) => Effect::None;
    cuModuleLoadFatBinary(module: Ptr, fatbin: Ptr) => Effect::None;
    cuModuleUnload(module: Ptr) => Effect::None;
    cuModuleGetFunction(func: Ptr, module: Ptr, name: *const c_char) => Effect::None;
    cuLibraryLoadData(lib: Ptr, code: Ptr, jo: Ptr, jv: Ptr, jn: c_uint, lo: Ptr, lv: Ptr, ln: c_uint) => Effect::None;
    cuLibraryLoadFromFile(lib: Ptr, file: *const c_char, jo: Ptr, jv: Ptr, jn: c_uint, lo: Ptr, lv: Ptr, ln: c_uint) => Effect::None;
    cuLibraryUnload(lib: Ptr) => Effect::None;
    cuLinkCreate_v2(n: c_uint, opts: Ptr, vals: Ptr, state: Ptr) => Effect::None;
    cuLinkAddData_v2(state: Ptr, kind: c_int, data: Ptr, size: Size, name: *const c_char, n: c_uint, opts: Ptr, vals: Ptr) => Effect::None;
    cuLinkAddFile_v2(state: Ptr, kind: c_int, path: *const c_char, n: c_uint, opts: Ptr, vals: Ptr) => Effect::None;
    cuLinkComplete(state: Ptr, cubin: Ptr, size: Ptr) => Effect::None;
    cuLinkDestroy(state: Ptr) => Effect::None;

    // Kernel launches.
    cuLaunchKernelEx(config: Ptr, f: Ptr, params: Ptr, extra: Ptr) => Effect::None;
    cuLaunchKernelEx_ptsz(config: Ptr, f: Ptr, params: Ptr, extra: Ptr) => Effect::None;
    cuLaunchCooperativeKernel(f: Ptr, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, smem: c_uint, stream: Ptr, params: Ptr) => Effect::None;
    cuLaunchCooperativeKernel_ptsz(f: Ptr, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, smem: c_uint, stream: Ptr, params: Ptr) => Effect::None;
    cuLaunchCooperativeKernelMultiDevice(list: Ptr, n: c_uint, flags: c_uint) => Effect::None;
    cuLaunchHostFunc(stream: Ptr, func: Ptr, data: Ptr) => Effect::None;
    cuLaunchHostFunc_ptsz(stream: Ptr, func: Ptr, data: Ptr) => Effect::None;
    cuLaunch(f: Ptr) => Effect::None;
    cuLaunchGrid(f: Ptr, w: c_int, h: c_int) => Effect::None;
    cuLaunchGridAsync(f: Ptr, w: c_int, h: c_int, stream: Ptr) => Effect::None;

    // CUDA graphs and stream capture: CUPTI stays attached once the program uses them.
    cuGraphLaunch(exec: Ptr, stream: Ptr) => graph_ahead();
    cuGraphLaunch_ptsz(exec: Ptr, stream: Ptr) => graph_ahead();
    cuGraphUpload(exec: Ptr, stream: Ptr) => graph_ahead();
    cuGraphUpload_ptsz(exec: Ptr, stream: Ptr) => graph_ahead();
    cuGraphInstantiateWithFlags(exec: Ptr, graph: Ptr, flags: u64) => graph_ahead();
    cuGraphInstantiate_v2(exec: Ptr, graph: Ptr, errnode: Ptr, log: Ptr, size: Size) => graph_ahead();
    cuGraphInstantiateWithParams(exec: Ptr, graph: Ptr, params: Ptr) => graph_ahead();
    cuGraphInstantiateWithParams_ptsz(exec: Ptr, graph: Ptr, params: Ptr) => graph_ahead();
    cuStreamBeginCapture(stream: Ptr) => graph_ahead();
    cuStreamBeginCapture_ptsz(stream: Ptr) => graph_ahead();
    cuStreamBeginCapture_v2(stream: Ptr, mode: c_int) => graph_ahead();
    cuStreamBeginCapture_v2_ptsz(stream: Ptr, mode: c_int) => graph_ahead();
    cuStreamBeginCaptureToGraph(stream: Ptr, graph: Ptr, deps: Ptr, data: Ptr, n: Size, mode: c_int) => graph_ahead();
    cuStreamBeginCaptureToGraph_ptsz(stream: Ptr, graph: Ptr, deps: Ptr, data: Ptr, n: Size, mode: c_int) => graph_ahead();
    cuStreamEndCapture(stream: Ptr, graph: Ptr) => Effect::None;
    cuStreamEndCapture_ptsz(stream: Ptr, graph: Ptr) => Effect::None;

    // Synchronisation: blocking waits, polls and GPU-side waits.
    cuStreamSynchronize(stream: Ptr) => Effect::Sync;
    cuStreamSynchronize_ptsz(stream: Ptr) => Effect::Sync;
    cuCtxSynchronize() => Effect::Sync;
    cuCtxSynchronize_v2(ctx: Ptr) => Effect::Sync;
    cuEventSynchronize(event: Ptr) => Effect::Sync;
    cuStreamQuery(stream: Ptr) => Effect::None;
    cuStreamQuery_ptsz(stream: Ptr) => Effect::None;
    cuEventQuery(event: Ptr) => Effect::None;
    cuStreamWaitEvent(stream: Ptr, event: Ptr, flags: c_uint) => Effect::None;
    cuStreamWaitEvent_ptsz(stream: Ptr, event: Ptr, flags: c_uint) => Effect::None;
    cuEventRecord(event: Ptr, stream: Ptr) => Effect::None;
    cuEventRecord_ptsz(event: Ptr, stream: Ptr) => Effect::None;
    cuEventRecordWithFlags(event: Ptr, stream: Ptr, flags: c_uint) => Effect::None;
    cuEventRecordWithFlags_ptsz(event: Ptr, stream: Ptr, flags: c_uint) => Effect::None;

    // Copies with a direction in the name.
    cuMemcpyHtoD(dst: Dptr32, src: Ptr, n: u32) => copy(HtoD, src, n as u64, Blocking);
    cuMemcpyHtoD_v2(dst: Dptr, src: Ptr, n: Size) => copy(HtoD, src, n as u64, Blocking);
    cuMemcpyHtoD_v2_ptds(dst: Dptr, src: Ptr, n: Size) => copy(HtoD, src, n as u64, Blocking);
    cuMemcpyDtoH(dst: Ptr, src: Dptr32, n: u32) => copy(DtoH, dst, n as u64, Blocking);
    cuMemcpyDtoH_v2(dst: Ptr, src: Dptr, n: Size) => copy(DtoH, dst, n as u64, Blocking);
    cuMemcpyDtoH_v2_ptds(dst: Ptr, src: Dptr, n: Size) => copy(DtoH, dst, n as u64, Blocking);
    cuMemcpyDtoD(dst: Dptr32, src: Dptr32, n: u32) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyDtoD_v2(dst: Dptr, src: Dptr, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyDtoD_v2_ptds(dst: Dptr, src: Dptr, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyHtoDAsync(dst: Dptr32, src: Ptr, n: u32, stream: Ptr) => copy(HtoD, src, n as u64, Async);
    cuMemcpyHtoDAsync_v2(dst: Dptr, src: Ptr, n: Size, stream: Ptr) => copy(HtoD, src, n as u64, Async);
    cuMemcpyHtoDAsync_v2_ptsz(dst: Dptr, src: Ptr, n: Size, stream: Ptr) => copy(HtoD, src, n as u64, Async);
    cuMemcpyDtoHAsync(dst: Ptr, src: Dptr32, n: u32, stream: Ptr) => copy(DtoH, dst, n as u64, Async);
    cuMemcpyDtoHAsync_v2(dst: Ptr, src: Dptr, n: Size, stream: Ptr) => copy(DtoH, dst, n as u64, Async);
    cuMemcpyDtoHAsync_v2_ptsz(dst: Ptr, src: Dptr, n: Size, stream: Ptr) => copy(DtoH, dst, n as u64, Async);
    cuMemcpyDtoDAsync(dst: Dptr32, src: Dptr32, n: u32, stream: Ptr) => copy(DtoD, std::ptr::null_mut(), n as u64, Async);
    cuMemcpyDtoDAsync_v2(dst: Dptr, src: Dptr, n: Size, stream: Ptr) => copy(DtoD, std::ptr::null_mut(), n as u64, Async);
    cuMemcpyDtoDAsync_v2_ptsz(dst: Dptr, src: Dptr, n: Size, stream: Ptr) => copy(DtoD, std::ptr::null_mut(), n as u64, Async);
    // CUDA arrays live on the device.
    cuMemcpyHtoA_v2(arr: Ptr, off: Size, src: Ptr, n: Size) => copy(HtoD, src, n as u64, Blocking);
    cuMemcpyHtoA_v2_ptds(arr: Ptr, off: Size, src: Ptr, n: Size) => copy(HtoD, src, n as u64, Blocking);
    cuMemcpyAtoH_v2(dst: Ptr, arr: Ptr, off: Size, n: Size) => copy(DtoH, dst, n as u64, Blocking);
    cuMemcpyAtoH_v2_ptds(dst: Ptr, arr: Ptr, off: Size, n: Size) => copy(DtoH, dst, n as u64, Blocking);
    cuMemcpyHtoAAsync_v2(arr: Ptr, off: Size, src: Ptr, n: Size, stream: Ptr) => copy(HtoD, src, n as u64, Async);
    cuMemcpyHtoAAsync_v2_ptsz(arr: Ptr, off: Size, src: Ptr, n: Size, stream: Ptr) => copy(HtoD, src, n as u64, Async);
    cuMemcpyAtoHAsync_v2(dst: Ptr, arr: Ptr, off: Size, n: Size, stream: Ptr) => copy(DtoH, dst, n as u64, Async);
    cuMemcpyAtoHAsync_v2_ptsz(dst: Ptr, arr: Ptr, off: Size, n: Size, stream: Ptr) => copy(DtoH, dst, n as u64, Async);
    cuMemcpyDtoA_v2(arr: Ptr, off: Size, src: Dptr, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyDtoA_v2_ptds(arr: Ptr, off: Size, src: Dptr, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyAtoD_v2(dst: Dptr, arr: Ptr, off: Size, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyAtoD_v2_ptds(dst: Dptr, arr: Ptr, off: Size, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyAtoA_v2(dst: Ptr, doff: Size, src: Ptr, soff: Size, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyAtoA_v2_ptds(dst: Ptr, doff: Size, src: Ptr, soff: Size, n: Size) => copy(DtoD, std::ptr::null_mut(), n as u64, Blocking);

    // Unified-addressing, peer, 2D/3D and batch copies.
    cuMemcpy(dst: Dptr, src: Dptr, n: Size) => copy_unified(dst, src, n as u64, Blocking);
    cuMemcpy_ptds(dst: Dptr, src: Dptr, n: Size) => copy_unified(dst, src, n as u64, Blocking);
    cuMemcpyAsync(dst: Dptr, src: Dptr, n: Size, stream: Ptr) => copy_unified(dst, src, n as u64, Async);
    cuMemcpyAsync_ptsz(dst: Dptr, src: Dptr, n: Size, stream: Ptr) => copy_unified(dst, src, n as u64, Async);
    cuMemcpyWithAttributesAsync(dst: Dptr, src: Dptr, n: Size, attr: Ptr, stream: Ptr) => copy_unified(dst, src, n as u64, Async);
    cuMemcpyWithAttributesAsync_ptsz(dst: Dptr, src: Dptr, n: Size, attr: Ptr, stream: Ptr) => copy_unified(dst, src, n as u64, Async);
    cuMemcpyPeer(dst: Dptr, dctx: Ptr, src: Dptr, sctx: Ptr, n: Size) => copy(Peer, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyPeer_ptds(dst: Dptr, dctx: Ptr, src: Dptr, sctx: Ptr, n: Size) => copy(Peer, std::ptr::null_mut(), n as u64, Blocking);
    cuMemcpyPeerAsync(dst: Dptr, dctx: Ptr, src: Dptr, sctx: Ptr, n: Size, stream: Ptr) => copy(Peer, std::ptr::null_mut(), n as u64, Async);
    cuMemcpyPeerAsync_ptsz(dst: Dptr, dctx: Ptr, src: Dptr, sctx: Ptr, n: Size, stream: Ptr) => copy(Peer, std::ptr::null_mut(), n as u64, Async);
    cuMemcpy2D_v2(p: Ptr) => copy2d(p, Blocking);
    cuMemcpy2D_v2_ptds(p: Ptr) => copy2d(p, Blocking);
    cuMemcpy2DUnaligned_v2(p: Ptr) => copy2d(p, Blocking);
    cuMemcpy2DUnaligned_v2_ptds(p: Ptr) => copy2d(p, Blocking);
    cuMemcpy2DAsync_v2(p: Ptr, stream: Ptr) => copy2d(p, Async);
    cuMemcpy2DAsync_v2_ptsz(p: Ptr, stream: Ptr) => copy2d(p, Async);
    cuMemcpy3D_v2(p: Ptr) => copy3d(p, Blocking);
    cuMemcpy3D_v2_ptds(p: Ptr) => copy3d(p, Blocking);
    cuMemcpy3DAsync_v2(p: Ptr, stream: Ptr) => copy3d(p, Async);
    cuMemcpy3DAsync_v2_ptsz(p: Ptr, stream: Ptr) => copy3d(p, Async);
    cuMemcpy3DPeer(p: Ptr) => copy3d_peer(p, Blocking);
    cuMemcpy3DPeer_ptds(p: Ptr) => copy3d_peer(p, Blocking);
    cuMemcpy3DPeerAsync(p: Ptr, stream: Ptr) => copy3d_peer(p, Async);
    cuMemcpy3DPeerAsync_ptsz(p: Ptr, stream: Ptr) => copy3d_peer(p, Async);
    cuMemcpyBatchAsync(dsts: Ptr, srcs: Ptr, sizes: *const Size, count: Size, attrs: Ptr, idxs: Ptr, nattrs: Size, fail: Ptr, stream: Ptr) => batch(sizes, count);
    cuMemcpyBatchAsync_ptsz(dsts: Ptr, srcs: Ptr, sizes: *const Size, count: Size, attrs: Ptr, idxs: Ptr, nattrs: Size, fail: Ptr, stream: Ptr) => batch(sizes, count);
    cuMemcpyBatchAsync_v2(dsts: Ptr, srcs: Ptr, sizes: *const Size, count: Size, attrs: Ptr, idxs: Ptr, nattrs: Size, stream: Ptr) => batch(sizes, count);
    cuMemcpyBatchAsync_v2_ptsz(dsts: Ptr, srcs: Ptr, sizes: *const Size, count: Size, attrs: Ptr, idxs: Ptr, nattrs: Size, stream: Ptr) => batch(sizes, count);
    cuMemcpy3DBatchAsync(n: Size, ops: Ptr, fail: Ptr, flags: u64, stream: Ptr) => Effect::None;
    cuMemcpy3DBatchAsync_ptsz(n: Size, ops: Ptr, fail: Ptr, flags: u64, stream: Ptr) => Effect::None;
    cuMemcpy3DBatchAsync_v2(n: Size, ops: Ptr, flags: u64, stream: Ptr) => Effect::None;
    cuMemcpy3DBatchAsync_v2_ptsz(n: Size, ops: Ptr, flags: u64, stream: Ptr) => Effect::None;

    // Memsets: bytes = elements x element size.
    cuMemsetD8(dst: Dptr32, v: u8, n: u32) => Effect::Bytes(n as u64);
    cuMemsetD8_v2(dst: Dptr, v: u8, n: Size) => Effect::Bytes(n as u64);
    cuMemsetD8_v2_ptds(dst: Dptr, v: u8, n: Size) => Effect::Bytes(n as u64);
    cuMemsetD16_v2(dst: Dptr, v: u16, n: Size) => Effect::Bytes(2 * n as u64);
    cuMemsetD16_v2_ptds(dst: Dptr, v: u16, n: Size) => Effect::Bytes(2 * n as u64);
    cuMemsetD32(dst: Dptr32, v: c_uint, n: u32) => Effect::Bytes(4 * n as u64);
    cuMemsetD32_v2(dst: Dptr, v: c_uint, n: Size) => Effect::Bytes(4 * n as u64);
    cuMemsetD32_v2_ptds(dst: Dptr, v: c_uint, n: Size) => Effect::Bytes(4 * n as u64);
    cuMemsetD8Async(dst: Dptr, v: u8, n: Size, stream: Ptr) => Effect::Bytes(n as u64);
    cuMemsetD8Async_ptsz(dst: Dptr, v: u8, n: Size, stream: Ptr) => Effect::Bytes(n as u64);
    cuMemsetD16Async(dst: Dptr, v: u16, n: Size, stream: Ptr) => Effect::Bytes(2 * n as u64);
    cuMemsetD16Async_ptsz(dst: Dptr, v: u16, n: Size, stream: Ptr) => Effect::Bytes(2 * n as u64);
    cuMemsetD32Async(dst: Dptr, v: c_uint, n: Size, stream: Ptr) => Effect::Bytes(4 * n as u64);
    cuMemsetD32Async_ptsz(dst: Dptr, v: c_uint, n: Size, stream: Ptr) => Effect::Bytes(4 * n as u64);
    cuMemsetD2D8_v2(dst: Dptr, pitch: Size, v: u8, w: Size, h: Size) => Effect::Bytes((w * h) as u64);
    cuMemsetD2D8_v2_ptds(dst: Dptr, pitch: Size, v: u8, w: Size, h: Size) => Effect::Bytes((w * h) as u64);
    cuMemsetD2D16_v2(dst: Dptr, pitch: Size, v: u16, w: Size, h: Size) => Effect::Bytes(2 * (w * h) as u64);
    cuMemsetD2D16_v2_ptds(dst: Dptr, pitch: Size, v: u16, w: Size, h: Size) => Effect::Bytes(2 * (w * h) as u64);
    cuMemsetD2D32_v2(dst: Dptr, pitch: Size, v: c_uint, w: Size, h: Size) => Effect::Bytes(4 * (w * h) as u64);
    cuMemsetD2D32_v2_ptds(dst: Dptr, pitch: Size, v: c_uint, w: Size, h: Size) => Effect::Bytes(4 * (w * h) as u64);
    cuMemsetD2D8Async(dst: Dptr, pitch: Size, v: u8, w: Size, h: Size, stream: Ptr) => Effect::Bytes((w * h) as u64);
    cuMemsetD2D8Async_ptsz(dst: Dptr, pitch: Size, v: u8, w: Size, h: Size, stream: Ptr) => Effect::Bytes((w * h) as u64);
    cuMemsetD2D16Async(dst: Dptr, pitch: Size, v: u16, w: Size, h: Size, stream: Ptr) => Effect::Bytes(2 * (w * h) as u64);
    cuMemsetD2D16Async_ptsz(dst: Dptr, pitch: Size, v: u16, w: Size, h: Size, stream: Ptr) => Effect::Bytes(2 * (w * h) as u64);
    cuMemsetD2D32Async(dst: Dptr, pitch: Size, v: c_uint, w: Size, h: Size, stream: Ptr) => Effect::Bytes(4 * (w * h) as u64);
    cuMemsetD2D32Async_ptsz(dst: Dptr, pitch: Size, v: c_uint, w: Size, h: Size, stream: Ptr) => Effect::Bytes(4 * (w * h) as u64);

    // Device memory.
    cuMemAlloc(dptr: Ptr, n: u32) => Effect::DeviceAlloc(n as u64);
    cuMemAlloc_v2(dptr: Ptr, n: Size) => Effect::DeviceAlloc(n as u64);
    cuMemAllocPitch_v2(dptr: Ptr, pitch: Ptr, w: Size, h: Size, elem: c_uint) => Effect::DeviceAlloc((w * h) as u64);
    cuMemAllocAsync(dptr: Ptr, n: Size, stream: Ptr) => Effect::DeviceAlloc(n as u64);
    cuMemAllocAsync_ptsz(dptr: Ptr, n: Size, stream: Ptr) => Effect::DeviceAlloc(n as u64);
    cuMemAllocFromPoolAsync(dptr: Ptr, n: Size, pool: Ptr, stream: Ptr) => Effect::DeviceAlloc(n as u64);
    cuMemAllocFromPoolAsync_ptsz(dptr: Ptr, n: Size, pool: Ptr, stream: Ptr) => Effect::DeviceAlloc(n as u64);
    cuMemFree(dptr: Dptr32) => release(dptr as usize);
    cuMemFree_v2(dptr: Dptr) => release(dptr as usize);
    cuMemFreeAsync(dptr: Dptr, stream: Ptr) => Effect::DeviceFree;
    cuMemFreeAsync_ptsz(dptr: Dptr, stream: Ptr) => Effect::DeviceFree;
    cuMemPoolTrimTo(pool: Ptr, keep: Size) => Effect::None;
    // Virtual memory management (PyTorch expandable segments).
    cuMemCreate(handle: Ptr, n: Size, prop: Ptr, flags: u64) => Effect::DeviceAlloc(n as u64);
    cuMemRelease(handle: u64) => Effect::DeviceFree;
    cuMemAddressReserve(ptr: Ptr, n: Size, align: Size, addr: Dptr, flags: u64) => Effect::None;
    cuMemAddressFree(ptr: Dptr, n: Size) => Effect::None;
    cuMemMap(ptr: Dptr, n: Size, off: Size, handle: u64, flags: u64) => Effect::Bytes(n as u64);
    cuMemUnmap(ptr: Dptr, n: Size) => Effect::None;
    cuMemSetAccess(ptr: Dptr, n: Size, desc: Ptr, count: Size) => Effect::None;

    // Host memory the driver pins; the shim remembers its ranges to classify copies.
    cuMemAllocHost(pp: *mut Ptr, n: u32) => pinned_alloc(pp, n as u64);
    cuMemAllocHost_v2(pp: *mut Ptr, n: Size) => pinned_alloc(pp, n as u64);
    cuMemHostAlloc(pp: *mut Ptr, n: Size, flags: c_uint) => pinned_alloc(pp, n as u64);
    cuMemFreeHost(p: Ptr) => release(p as usize);
    cuMemHostRegister(p: Ptr, n: Size, flags: c_uint) => pinned_register(p, n as u64);
    cuMemHostRegister_v2(p: Ptr, n: Size, flags: c_uint) => pinned_register(p, n as u64);
    cuMemHostUnregister(p: Ptr) => release(p as usize);

    // Unified memory.
    cuMemAllocManaged(dptr: *mut Dptr, n: Size, flags: c_uint) => managed_alloc(dptr, n as u64);
    cuMemPrefetchAsync(ptr: Dptr, n: Size, dev: c_int, stream: Ptr) => Effect::Bytes(n as u64);
    cuMemPrefetchAsync_ptsz(ptr: Dptr, n: Size, dev: c_int, stream: Ptr) => Effect::Bytes(n as u64);
    cuMemPrefetchAsync_v2(ptr: Dptr, n: Size, loc: MemLocation, flags: c_uint, stream: Ptr) => Effect::Bytes(n as u64);
    cuMemPrefetchAsync_v2_ptsz(ptr: Dptr, n: Size, loc: MemLocation, flags: c_uint, stream: Ptr) => Effect::Bytes(n as u64);
    cuMemPrefetchBatchAsync(ptrs: Ptr, sizes: *const Size, count: Size, locs: Ptr, idxs: Ptr, nlocs: Size, flags: u64, stream: Ptr) => Effect::Bytes(sum_sizes(sizes, count));
    cuMemPrefetchBatchAsync_ptsz(ptrs: Ptr, sizes: *const Size, count: Size, locs: Ptr, idxs: Ptr, nlocs: Size, flags: u64, stream: Ptr) => Effect::Bytes(sum_sizes(sizes, count));
    cuMemAdvise(ptr: Dptr, n: Size, advice: c_int, dev: c_int) => Effect::None;
    cuMemAdvise_v2(ptr: Dptr, n: Size, advice: c_int, loc: MemLocation) => Effect::None;
}
// NCCL (nccl.rs): resolved to libnccl's `pncclX` aliases, not to libcuda. Operations are
// counted when issued, before the call (a non-blocking communicator answers ncclInProgress);
// `then` acts on the result: a communicator is registered once NCCL has written it.
nccl -> NcclResult, else NCCL_INTERNAL_ERROR; {
    ncclAllReduce(send: Ptr, recv: Ptr, n: Size, dt: c_int, op: c_int, comm: Ptr, stream: Ptr) => operation(Op::AllReduce, n, dt, comm);
    ncclBroadcast(send: Ptr, recv: Ptr, n: Size, dt: c_int, root: c_int, comm: Ptr, stream: Ptr) => operation(Op::Broadcast, n, dt, comm);
    ncclReduce(send: Ptr, recv: Ptr, n: Size, dt: c_int, op: c_int, root: c_int, comm: Ptr, stream: Ptr) => operation(Op::Reduce, n, dt, comm);
    // Bytes count what each rank sends: `sendcount` elements.
    ncclAllGather(send: Ptr, recv: Ptr, n: Size, dt: c_int, comm: Ptr, stream: Ptr) => operation(Op::AllGather, n, dt, comm);
    // Bytes count what each rank receives: `recvcount` elements.
    ncclReduceScatter(send: Ptr, recv: Ptr, n: Size, dt: c_int, op: c_int, comm: Ptr, stream: Ptr) => operation(Op::ReduceScatter, n, dt, comm);
    ncclSend(send: Ptr, n: Size, dt: c_int, peer: c_int, comm: Ptr, stream: Ptr) => operation(Op::Send, n, dt, comm);
    ncclRecv(recv: Ptr, n: Size, dt: c_int, peer: c_int, comm: Ptr, stream: Ptr) => operation(Op::Recv, n, dt, comm);
    ncclGroupStart() => group_started();
    ncclGroupEnd() => Effect::Collective;
    ncclCommInitRank(comm: *mut Ptr, nranks: c_int, id: UniqueId, rank: c_int) => Effect::None, then registers(comm, &id, rank, nranks);
    ncclCommInitRankConfig(comm: *mut Ptr, nranks: c_int, id: UniqueId, rank: c_int, config: Ptr) => Effect::None, then registers(comm, &id, rank, nranks);
    ncclCommSplit(comm: Ptr, color: c_int, key: c_int, newcomm: *mut Ptr, config: Ptr) => Effect::None, then splits(comm, color, key, newcomm);
    ncclCommDestroy(comm: Ptr) => Effect::None, then forgets(comm);
    ncclCommAbort(comm: Ptr) => Effect::None, then forgets(comm);
}
// Written by hand: the resolvers swap the pointers they return (doors.rs); the launches
// pass their stack arguments on as one block (launch.rs).
manual {
    cuGetProcAddress => doors::cuGetProcAddress;
    cuGetProcAddress_v2 => doors::cuGetProcAddress_v2;
    cuLaunchKernel => launch::cuLaunchKernel;
    cuLaunchKernel_ptsz => launch::cuLaunchKernel_ptsz;
}
        }
    };
}
pub(crate) use hook_list;

hook_list!(hook_ids);

impl Hook {
    /// The exact exported name, without the NUL.
    pub fn name(self) -> &'static str {
        let name = HOOK_NAMES.get(self as usize).copied().unwrap_or("\0");
        name.strip_suffix('\0').unwrap_or(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_match_ids() {
        let mut names: Vec<&str> = ALL_HOOKS.iter().map(|h| h.name()).collect();
        assert_eq!(
            names[Hook::cuLaunchKernel_ptsz as usize],
            "cuLaunchKernel_ptsz"
        );
        assert_eq!(Hook::cuGetProcAddress_v2.name(), "cuGetProcAddress_v2");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), HOOK_COUNT);
    }

    /// The CLI checks API names (budgets) against `gpuspy_format::apis::HOOKED_APIS`; it
    /// must list exactly the families of this hook list.
    #[test]
    fn the_format_crate_lists_every_hooked_family() {
        let mut families: Vec<&str> = ALL_HOOKS
            .iter()
            .map(|h| gpuspy_format::base_name(h.name()))
            .collect();
        families.sort_unstable();
        families.dedup();
        assert_eq!(families, gpuspy_format::apis::HOOKED_APIS);
    }
}
