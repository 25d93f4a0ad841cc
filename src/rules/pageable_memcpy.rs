use crate::diagnose::{ms, share, Finding, Layer, Outcome, Rule};
use crate::profile::Profile;
use gpuspy_format::{Direction, HostKind, SyncCause};

/// Asynchronous copies from pageable memory, which the driver performs synchronously.
pub struct PageableMemcpy;

const MIN_CALLS: u64 = 10;
const MIN_SHARE: f64 = 0.05;

impl Rule for PageableMemcpy {
    fn id(&self) -> &'static str {
        "pageable-memcpy"
    }
    fn layer(&self) -> Layer {
        Layer::Memory
    }
    fn doc(&self) -> &'static str {
        "`*Async` copies whose host side is pageable memory block the host, so copies cannot overlap compute.

Evidence: the `pageable-async-copy` implicit syncs. These are async copies whose host
buffer the shim did not see allocated or registered as pinned; the driver stages such
copies through a pinned buffer and returns only when it is done. The rule reports their
count, the time the host was blocked, the bytes, and that time's share of the steady-state
time. It fires at 10 or more such copies that take 5 % or more of that time.

Impact: the blocked share. With pinned memory the same copies run asynchronously and
overlap the GPU's work.

Fix: pin the host buffers. In PyTorch, `DataLoader(..., pin_memory=True)` and
`tensor.to('cuda', non_blocking=True)`; `tensor.pin_memory()` for buffers you reuse. In
CuPy, `cupyx.empty_pinned`/`cupyx.zeros_pinned`. For an existing buffer,
`cudaHostRegister`."
    }
    fn check(&self, p: &Profile) -> Outcome {
        let Some(s) = p.sync(SyncCause::PageableAsyncCopy) else {
            return Outcome::Clear;
        };
        let steady = p.steady_ns();
        let blocked_share = share(s.total_ns, steady);
        if s.calls < MIN_CALLS || blocked_share < MIN_SHARE {
            return Outcome::Clear;
        }
        let (h2d_calls, h2d_bytes) = p.copied(Direction::HtoD, HostKind::Pageable);
        let (d2h_calls, d2h_bytes) = p.copied(Direction::DtoH, HostKind::Pageable);
        Outcome::Found(
            Finding::new(
                self,
                blocked_share,
                format!(
                    "{} async copies from pageable memory blocked the host for {:.1} ms, {:.1} % of the steady-state time",
                    s.calls,
                    ms(s.total_ns),
                    blocked_share * 100.0
                ),
                "Pin the host buffers: DataLoader(pin_memory=True) and .to('cuda', non_blocking=True); tensor.pin_memory() for reused buffers; CuPy: cupyx.empty_pinned.",
            )
            .evidence("pageable_async_copies", s.calls)
            .evidence("blocked_ms", ms(s.total_ns))
            .evidence("steady_ms", ms(steady))
            .evidence("htod_pageable_copies", h2d_calls)
            .evidence("htod_pageable_bytes", h2d_bytes)
            .evidence("dtoh_pageable_copies", d2h_calls)
            .evidence("dtoh_pageable_bytes", d2h_bytes)
            .call_sites(p, s.total_ns, |site| site.cause == Some(SyncCause::PageableAsyncCopy)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::{synthetic::run, Severity};

    #[test]
    fn blocking_pageable_copies_fire() {
        let p = run(2.0)
            .sync(SyncCause::PageableAsyncCopy, 200, 600.0)
            .copy(Direction::HtoD, HostKind::Pageable, 200, 800 << 20)
            .build();
        let Outcome::Found(f) = PageableMemcpy.check(&p) else {
            panic!("no finding")
        };
        assert_eq!(f.layer, Layer::Memory);
        assert_eq!(f.severity, Severity::Warning);
        assert!((f.impact - 0.3).abs() < 0.01);
        assert_eq!(f.evidence["htod_pageable_bytes"], 800u64 << 20);
        assert!(!f.heuristic);
    }

    #[test]
    fn pinned_copies_and_a_few_small_pageable_ones_do_not() {
        let pinned = run(2.0)
            .copy(Direction::HtoD, HostKind::Pinned, 200, 800 << 20)
            .build();
        assert!(matches!(PageableMemcpy.check(&pinned), Outcome::Clear));
        let few = run(2.0)
            .sync(SyncCause::PageableAsyncCopy, 3, 500.0)
            .build();
        assert!(matches!(PageableMemcpy.check(&few), Outcome::Clear));
        let quick = run(2.0)
            .sync(SyncCause::PageableAsyncCopy, 100, 5.0)
            .build();
        assert!(matches!(PageableMemcpy.check(&quick), Outcome::Clear));
    }
}
