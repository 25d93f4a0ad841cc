//! The hot path: what runs inside an intercepted call (the hook list, resolution, each
//! call's effect, the recording) and the interposed libc calls. It uses only the base; it
//! reaches the collectors and the lifecycle through `UPCALLS` alone.

pub(crate) mod dispositions;
pub(crate) mod doors;
pub(crate) mod effect;
pub(crate) mod exec;
pub(crate) mod exports;
pub(crate) mod hooks;
pub(crate) mod launch;
pub(crate) mod nccl;
pub(crate) mod record;
pub(crate) mod resolve;
pub(crate) mod ring;
pub(crate) mod signals;

#[cfg(test)]
pub(crate) mod no_alloc_tests;
