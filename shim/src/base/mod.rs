//! The base layer: what every layer above reads (the clock, the frozen config, the
//! activation switch, the thread-local state) and the process-wide services they share.
//! Its modules use only each other.

pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod forklock;
pub(crate) mod hostmem;
pub(crate) mod reserve;
pub(crate) mod switch;
pub(crate) mod tls;
pub(crate) mod unwrapped;
