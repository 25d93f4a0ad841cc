//! This thread's recorder state: the pointer to its statistics block (whose `in_call`
//! word is the nesting guard, readable by other threads).
//!
//! A `thread_local!` in a shared object uses the general-dynamic TLS model, a call to
//! `__tls_get_addr` on every access (about 14 instructions, a third of the hot path's
//! budget). On x86-64 the shim instead keeps the word in initial-exec TLS, reached
//! with one `%fs`-relative load: the slot is defined in `.tbss` below and addressed through
//! its GOT TP offset. A preloaded library gets static TLS at startup, and glibc keeps spare
//! static TLS for the few bytes a late `dlopen` of the shim needs. Elsewhere,
//! `thread_local!` is used. The word is plain data, zero-initialised, with no destructor,
//! so they stay valid until the thread's very end.

use std::cell::Cell;

#[repr(C)]
pub struct Local {
    /// This thread's statistics block (`record::ThreadStats`), or null: untyped here so
    /// that the TLS word sits below the recorder that owns what it points to.
    pub slot: Cell<*const ()>,
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
std::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".local gpuspy_thread_local",
    ".type gpuspy_thread_local, @object",
    ".size gpuspy_thread_local, 8",
    "gpuspy_thread_local:",
    ".zero 8",
    ".popsection",
);

/// This thread's `Local`, or None where the thread cannot have one (never on x86-64).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
pub fn local() -> Option<&'static Local> {
    let addr: usize;
    // SAFETY: the initial-exec TLS access sequence for a symbol defined above: load its
    // offset from the thread pointer from the GOT, add the thread pointer (%fs:0).
    unsafe {
        std::arch::asm!(
            "movq gpuspy_thread_local@GOTTPOFF(%rip), {0}",
            "addq %fs:0, {0}",
            out(reg) addr,
            options(att_syntax, nostack, pure, readonly),
        );
    }
    // SAFETY: the 8 zero-initialised bytes of this thread's TLS block are a valid Local
    // (null slot), used only by this thread.
    Some(unsafe { &*(addr as *const Local) })
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
thread_local! {
    static LOCAL: Local = const {
        Local { slot: Cell::new(std::ptr::null()) }
    };
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[inline(always)]
pub fn local() -> Option<&'static Local> {
    // SAFETY: the reference is used on this thread only, while it runs.
    LOCAL.try_with(|l| unsafe { &*(l as *const Local) }).ok()
}
