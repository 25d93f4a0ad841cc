use crate::analysis::phases::{PhaseKind, TimeAxis, LOADING};
use crate::analysis::profile::{total, Profile, STARTUP_APIS};
use crate::analysis::rule::{ms, Finding, Input, Layer, Outcome, Rule};
use crate::units::share;

/// Driver init, contexts, module loading and JIT take a large part of the run.
pub struct SlowStartup;

const MIN_SHARE: f64 = 0.25;
const MIN_NS: u64 = 200_000_000;
/// With a timeline: module loading and JIT count as slow when they take this long and at
/// least as long as the driver's own initialisation. Not twice as long: eager module
/// loading inflates the context's creation too (H200, CUDA_MODULE_LOADING=EAGER: 1.7 s of
/// loading against 1.2 s of init, 0.3 s lazily; bench/results/gpu-2026-11-30-phases-1).
/// Where the dump says EAGER was set, the context's creation counts as loading: left in
/// init, the H200's eager runs read 22-29 % loading where 27-44 % of the wall time went
/// when it was unset (`ProcessInfo::eager_context_ns`).
const MIN_LOADING_NS: u64 = 500_000_000;

impl Rule for SlowStartup {
    fn id(&self) -> &'static str {
        "slow-startup"
    }
    fn layer(&self) -> Layer {
        Layer::Runtime
    }
    fn doc(&self) -> &'static str {
        "Driver initialisation, context creation, module and library loading and JIT compilation take a large share of the run.

Evidence: the time inside `cuInit`, `cuCtxCreate`, `cuDevicePrimaryCtxRetain`,
`cuModuleLoad*`, `cuLibraryLoad*` and `cuLink*`, against the time from the first driver
call to the end of the run. The rule fires when that is at least 0.2 s and 25 % of the
run. On an H200, `cuInit` and the primary context take about 0.3 s together.

Impact: the start-up share of the run. Short jobs, CI tests and per-request processes pay
it every time.

With a timeline (dumps of schema 2), start-up is a phase of its own (docs/diagnosis.md,
\"Phases\"), shown beside the verdict with what it was spent on, and the driver's own
initialisation (`cuInit`, the primary context: about 0.3 s that every process pays) is never
a finding. The rule fires only when module loading and JIT, in the start-up and in the
pauses they cause later, take 0.5 s or more, at least as long as the driver's initialisation,
and 25 % or more of the wall time of the processes that used a GPU (a compile worker or a
launcher's agent beside them is left out); the impact is that share. A pause counts as
loading when modules were loaded in it or as work resumed, after the first kernel launch:
a host pause before it ended by the first kernels' lazy loading is set-up. Its warning comes
after the steady state's: the verdict is the loop's. Where the dump records
`CUDA_MODULE_LOADING=EAGER` (`process.cuda_env`), creating a context loads every module
registered so far: its time counts as loading, not initialisation, and the fix is to unset
it.

Fix: keep processes alive (persistent workers, a server instead of one process per
request); set `CUDA_MODULE_LOADING=LAZY` (the default since CUDA 12.2); keep JIT caches
warm across runs (`CUDA_CACHE_MAXSIZE`, `TRITON_CACHE_DIR`, TorchInductor's FX graph
cache); don't create contexts per task. A JIT compiler such as `torch.compile` compiles in
every new process even with its caches warm (7-11 s for a 4-layer MLP on the H200, cache
warm): in a run this short, compare it with eager mode."
    }
    fn check(&self, input: &Input) -> Outcome {
        let p = input.profile;
        if let Some(axis) = &input.axis {
            return self.on_axis(p, axis);
        }
        let startup = p.startup_ns();
        let active = p.active_ns();
        let startup_share = share(startup, active);
        if startup < MIN_NS || startup_share < MIN_SHARE {
            return Outcome::Clear;
        }
        let mut finding = Finding::new(
            self,
            startup_share,
            format!(
                "Start-up calls took {:.1} % of the time since the first driver call. That is {:.0} ms.",
                startup_share * 100.0,
                ms(startup)
            ),
            FIX,
        )
        .evidence("startup_ms", ms(startup))
        .evidence("active_ms", ms(active));
        for api in STARTUP_APIS {
            let ns = p.total_ns(api);
            if ns > 0 {
                finding = finding.evidence(&format!("{api}_ms"), ms(ns));
            }
        }
        Outcome::Found(finding)
    }

    fn judges_startup(&self) -> bool {
        true
    }
}

impl SlowStartup {
    /// The judgement on the phases of timelines.
    fn on_axis(&self, p: &Profile, axis: &TimeAxis) -> Outcome {
        // torch.compile's worker pool, alive 7-12 s of an 18-29 s run, held its JIT share
        // under 25 % when its wall time counted.
        let judged: Vec<_> = axis.judged().map(|(i, a)| (&p.processes[i], a)).collect();
        let eager_contexts = total(judged.iter().map(|(x, _)| x.eager_context_ns));
        let init =
            total(judged.iter().map(|(_, a)| a.startup.init_ns)).saturating_sub(eager_contexts);
        let in_startup = total(judged.iter().map(|(_, a)| a.startup.module_ns)) + eager_contexts;
        let pauses = total(
            judged
                .iter()
                .flat_map(|(_, a)| &a.phases)
                .filter(|ph| ph.kind == PhaseKind::Pause && ph.name.as_deref() == Some(LOADING))
                .map(|ph| ph.end_unix_ns - ph.start_unix_ns),
        );
        let loading = in_startup + pauses;
        let wall = total(judged.iter().map(|(x, _)| x.wall_ns));
        let loading_share = share(loading, wall);
        if loading < MIN_LOADING_NS || loading < init || loading_share < MIN_SHARE {
            return Outcome::Clear;
        }
        let eager = if eager_contexts > 0 {
            format!(
                ", {:.0} ms of it creating contexts under CUDA_MODULE_LOADING=EAGER",
                ms(eager_contexts)
            )
        } else {
            String::new()
        };
        Outcome::Found(
            Finding::new(
                self,
                loading_share,
                format!(
                    "Module loading and JIT took {:.1} % of the wall time. That is {:.0} ms: {:.0} ms in start-up, {:.0} ms in pauses{eager}. Driver initialisation took {:.0} ms.",
                    loading_share * 100.0,
                    ms(loading),
                    ms(in_startup),
                    ms(pauses),
                    ms(init)
                ),
                if eager_contexts > 0 { EAGER_FIX } else { FIX },
            )
            .evidence("loading_ms", ms(loading))
            .evidence("eager_context_ms", ms(eager_contexts))
            .evidence("startup_loading_ms", ms(in_startup))
            .evidence("loading_pause_ms", ms(pauses))
            .evidence("init_ms", ms(init))
            .evidence("wall_ms", ms(wall)),
        )
    }
}

const EAGER_FIX: &str = "Unset CUDA_MODULE_LOADING=EAGER (lazy loading is the default since CUDA 12.2): eager loading loads every module of every library at start-up.";
const FIX: &str = "Keep processes alive (persistent workers/servers); CUDA_MODULE_LOADING=LAZY; keep JIT caches warm (CUDA_CACHE_MAXSIZE, TRITON_CACHE_DIR, Inductor FX graph cache); in a run this short, compare torch.compile with eager mode.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::diagnose::synthetic::run;

    #[test]
    fn a_short_run_dominated_by_init_fires() {
        let p = run(1.0)
            .api("cuInit", 1, 300.0, 0)
            .api("cuLibraryLoadData", 20, 300.0, 0)
            .build();
        let Outcome::Found(f) = SlowStartup.check(&Input::new(&p)) else {
            panic!("no finding")
        };
        assert_eq!(f.layer, Layer::Runtime);
        assert!((f.impact - 0.6).abs() < 0.01);
        assert_eq!(f.evidence["cuInit_ms"], 300.0);
    }

    #[test]
    fn a_long_run_amortises_its_start_up() {
        let p = run(60.0).api("cuInit", 1, 300.0, 0).build();
        assert!(matches!(SlowStartup.check(&Input::new(&p)), Outcome::Clear));
        let tiny = run(0.2).api("cuInit", 1, 100.0, 0).build();
        assert!(matches!(
            SlowStartup.check(&Input::new(&tiny)),
            Outcome::Clear
        ));
    }
}
