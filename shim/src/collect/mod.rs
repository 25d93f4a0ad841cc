//! The collectors: gpuspy's own threads and capture, reading what the hot path recorded
//! and what the GPU reports. They use the hot path and the base, never the lifecycle.

pub(crate) mod events;
pub(crate) mod gpu;
pub(crate) mod nvtx;
pub(crate) mod pystack;
pub(crate) mod timeline;
pub(crate) mod watchdog;
