//! The exported wrappers of the hook list (`hooks.rs`): one `extern "C"` function per line,
//! under the library's own name, which resolves the real function, builds the line's effect
//! from the arguments, times the call, records it and returns the result unchanged.

#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::effect::{
    batch, copy, copy2d, copy3d, copy3d_peer, copy_unified, graph_ahead, managed_alloc,
    pinned_alloc, pinned_register, release, sum_sizes, Effect, Mode::Async, Mode::Blocking,
};
use crate::hooks::{
    hook_list, CUresult, Dptr, Dptr32, Hook, MemLocation, Ptr, ResultCode, Size, Then,
    CUDA_ERROR_NOT_FOUND,
};
use crate::nccl::{
    forgets, group_started, operation, registers, splits, NcclResult, Op, UniqueId,
    NCCL_INTERNAL_ERROR,
};
use gpuspy_format::Direction::{DtoD, DtoH, HtoD, Peer};
use std::ffi::{c_char, c_int, c_uint, c_void};

/// `()` where a line has no `then`.
macro_rules! or_nothing {
    () => {
        ()
    };
    ($then:expr) => {
        $then
    };
}

/// One exported wrapper: resolve the real function, build the effect and the `then` from
/// the arguments (before the call, so they may act at once), time the call, record, run
/// `then` on the result, return the result unchanged.
macro_rules! wrapper {
    ($name:ident, $result:ty, $missing:expr, ($($arg:ident : $ty:ty),*), $effect:expr, $then:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $result {
            type Real = unsafe extern "C" fn($($ty),*) -> $result;
            let Some(real) = crate::resolve::real_fn(Hook::$name) else {
                return $missing;
            };
            // SAFETY: the pointer is the library's export of exactly this name (NCCL: its
            // `p` alias), whose signature is the one this line of the hook list declares.
            let real: Real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
            let effect: Effect = $effect;
            let then = $then;
            let span = crate::record::begin(Hook::$name);
            // SAFETY: forwarding the caller's own arguments to the real function.
            let result = unsafe { real($($arg),*) };
            crate::record::end(span, Hook::$name, effect, ResultCode::code(result));
            Then::<$result>::then(then, result);
            result
        }
    };
}

/// One exported wrapper per line of the list (the hand-written ones are `launch.rs` and
/// `doors.rs`).
macro_rules! hook_wrappers {
    (
        driver -> $dres:ty, else $dmissing:expr; {
            $( $name:ident ( $($arg:ident : $ty:ty),* ) => $effect:expr; )*
        }
        nccl -> $nres:ty, else $nmissing:expr; {
            $( $nname:ident ( $($narg:ident : $nty:ty),* ) => $neffect:expr $(, then $nthen:expr)?; )*
        }
        manual { $( $mname:ident => $($mpath:ident)::+; )* }
    ) => {
        $( wrapper!($name, $dres, $dmissing, ($($arg: $ty),*), $effect, ()); )*
        $( wrapper!(
            $nname, $nres, $nmissing, ($($narg: $nty),*), $neffect, or_nothing!($($nthen)?)
        ); )*
    };
}

hook_list!(hook_wrappers);
