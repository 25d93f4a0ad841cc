//! When the gpuspy thread switches CUPTI's kinds on and off in the sampled mode: the traced
//! kinds' duty cycle and, once the program has managed memory, the unified-memory
//! counters' (`super::sampling`). Pure: the thread hands in what it saw (times, the slot's
//! records and launches, the program's flags) and gets back what to switch and how long
//! to sleep; it makes the CUPTI calls and reports the time they returned at. Times named
//! `unix` are Unix ns, as the records' are; `monotonic` ones are the thread's clock.

use super::sampling::{DutyCycle, AWAITED_RECORDS_TO_DETACH};

/// How often the gpuspy thread looks for the first kernel launch after a managed
/// allocation, to switch the unified-memory counters on (a step of the H200's staged
/// managed loop takes 50-100 ms).
const UM_LAUNCH_POLL_NS: u64 = 5_000_000;
/// How long the unified-memory counters wait for that launch at most.
const UM_LAUNCH_WAIT_NS: u64 = 5_000_000_000;
/// After a switch of the traced kinds that the program's calls in flight held back, the
/// next attempt: a blocking copy that waits for the queue ends within a few steps.
const HOLD_RETRY_NS: u64 = 5_000_000;

/// The duty cycles of the sampled mode: the traced kinds', and the unified-memory
/// counters' once the program has managed memory.
pub struct KindSwitches {
    traced: Option<DutyCycle>,
    unified_memory: Option<DutyCycle>,
    /// When (monotonic) the gpuspy thread found managed memory, and the host's kernel
    /// launches then.
    launches_at_managed: Option<(u64, u64)>,
    sampled: bool,
    /// Unix ns before which the traced kinds' switch is not tried again: the last attempt
    /// found the program's calls still in flight after its patience.
    retry_at: u64,
}

/// What the gpuspy thread saw when it woke.
pub struct Woke {
    pub monotonic: u64,
    pub unix: u64,
    /// The program has allocated managed memory.
    pub managed_memory: bool,
    /// The host's kernel launches so far, where `wants_launches` asked for them.
    pub launches: Option<u64>,
    /// The program uses NCCL.
    pub nccl: bool,
}

/// What to switch at a wake-up, in this order.
#[derive(Debug, PartialEq)]
pub struct Wake {
    /// Switch the unified-memory counters on: their cycle has begun.
    pub start_unified_memory: bool,
    pub traced: Traced,
    /// Switch the unified-memory counters on (true) or off, then `unified_memory_switched`.
    pub unified_memory: Option<bool>,
}

/// What to do with the traced kinds at a wake-up.
#[derive(Debug, PartialEq)]
pub enum Traced {
    Wait,
    /// Switch them on, then `traced_on` or `held_back`.
    TurnOn,
    /// Gather the slot's records (a collect), then `look_at_slot`.
    LookAtSlot,
}

/// What the slot on comes to, looked at with its records so far.
#[derive(Debug, PartialEq)]
pub enum Look {
    /// It goes on.
    Continue,
    /// Within budget at its end: the next slot follows with the kinds left on; start the
    /// slot's count again (`cupti::next_slot`).
    NextSlot,
    /// Over budget: switch the kinds off, then `held_back`, or gather the rest of the
    /// slot's records and `slot_ended`.
    TurnOff,
}

/// Whether CUPTI may be detached for the slots off, as the gpuspy thread finds it.
pub struct Detaching {
    /// The mode and the program allow it (`cupti::may_detach_between_slots`).
    pub allowed: bool,
    /// Kernel records still awaited.
    pub awaited_records: u64,
    /// What a detach and the next attach cost on average.
    pub switch_ns: u64,
}

/// What follows a slot that ended over budget.
#[derive(Debug, PartialEq)]
pub enum AfterSlot {
    /// The cycle is one slot after all: switch the kinds on again, then `traced_on` or
    /// `held_back`.
    TurnOn,
    /// Detach CUPTI for the slots off.
    Detach,
    /// Stay attached, the kinds off.
    StayAttached,
}

impl KindSwitches {
    /// The switches of a CUPTI that started at `unix`: the traced kinds on from then when
    /// `sampled`, none under full capture.
    pub fn new(sampled: bool, unix: u64) -> KindSwitches {
        KindSwitches {
            traced: sampled.then(|| DutyCycle::adaptive(unix)),
            unified_memory: None,
            launches_at_managed: None,
            sampled,
            retry_at: 0,
        }
    }

    /// Whether the next `woke` needs the host's launches: to note them when managed memory
    /// is found, and to see the first launch after it.
    pub fn wants_launches(&self, managed_memory: bool) -> bool {
        match self.launches_at_managed {
            None => self.sampled && managed_memory,
            Some(_) => self.unified_memory.is_none(),
        }
    }

    /// What to switch now.
    pub fn woke(&mut self, seen: &Woke) -> Wake {
        let unix = seen.unix;
        if self.sampled && self.launches_at_managed.is_none() && seen.managed_memory {
            self.launches_at_managed = Some((seen.monotonic, seen.launches.unwrap_or(0)));
            if let Some(traced) = self.traced.as_mut() {
                traced.managed_memory(unix);
            }
        }
        // The counters' cycle starts at the first kernel launch after the allocation: begun
        // at the allocation, its first slot saw the host fill the memory (every round of
        // the H200's staged loops, 2026-12-01), and a run shorter than the cycle had only
        // those set-up faults, scaled up to the whole run. At most `UM_LAUNCH_WAIT_NS`
        // later: a program that only replays CUDA graphs makes no `cuLaunch*` call.
        let start_unified_memory = match self.launches_at_managed {
            Some((found, launches)) if self.unified_memory.is_none() => {
                seen.monotonic >= found + UM_LAUNCH_WAIT_NS
                    || seen.launches.is_some_and(|now| now > launches)
            }
            _ => false,
        };
        if start_unified_memory {
            self.unified_memory = Some(DutyCycle::unified_memory(unix));
        }
        let retry_at = self.retry_at;
        let traced = match self
            .traced
            .as_mut()
            .filter(|d| unix >= d.wake_at().max(retry_at))
        {
            None => Traced::Wait,
            Some(traced) if !traced.is_on() => Traced::TurnOn,
            Some(traced) if seen.nccl => {
                // With NCCL the kinds stay on, as under GPUSPY_CUPTI=full: 2 of 5 DDP jobs
                // on two H200s had a rank segfault while they were switched off and on
                // every slot (72-91 times a job; bench/results/gpu-2026-11-30-run9-ddp).
                // The cause is not known; full capture ran DDP cleanly on 2026-11-29.
                traced.turned_on(unix);
                Traced::Wait
            }
            Some(_) => Traced::LookAtSlot,
        };
        let unified_memory = self
            .unified_memory
            .as_ref()
            .filter(|d| unix >= d.next_at())
            .map(|d| !d.is_on());
        Wake {
            start_unified_memory,
            traced,
            unified_memory,
        }
    }

    /// The slot on, looked at `unix` (at its end or inside a long one) with `slot`, its
    /// records and the host's launches so far (`cupti::this_slot`).
    pub fn look_at_slot(&mut self, unix: u64, slot: (u64, u64)) -> Look {
        let Some(traced) = self.traced.as_mut() else {
            return Look::Continue;
        };
        if traced.ends_now(unix, slot.0) {
            Look::TurnOff
        } else if unix >= traced.next_at() {
            // Within budget, the next slot follows with the kinds left on: only the count
            // of records starts again. A job cheap to record was switched off and on at
            // every slot end, 5 to 50 times a second, changing CUPTI's state under the
            // program's running kernels for nothing.
            traced.slot_ended(unix, slot.0, slot.1);
            traced.turned_on(unix);
            Look::NextSlot
        } else {
            Look::Continue
        }
    }

    /// Whether kernel records that stopped may bring CUPTI back attached anew, at a slot's
    /// end. Not once the program has managed memory: the detach drops the unified-memory
    /// counters' configuration, which the traced kinds' attach does not renew.
    pub fn may_restart(&self) -> bool {
        self.launches_at_managed.is_none()
    }

    /// The slot switched off ended at `unix` with `slot` (records, launches) in all: its
    /// rate decides the next cycle.
    pub fn slot_ended(&mut self, unix: u64, slot: (u64, u64), detaching: &Detaching) -> AfterSlot {
        // Off for a while, CUPTI is detached: attached, it costs every launch
        // (`cupti::detach`). Managed memory keeps it attached (the traced kinds' fixed
        // cycle never detaches, nor does the counters' own once on): configured again
        // after a detach, the counters recorded no fault on the H200. So do kernels still
        // queued from the slot: a detach flushes their records back untimed and waits for
        // them. A Triton loop with ~4 s of 2.3 ms kernels queued had a detach take 1.7 s,
        // one of its launches blocked 1.6 s behind it, and 1,811 records untimed: its busy
        // time read 0.6 % (bench/results/gpu-2026-12-01-run11-phases-2).
        let detachable = self.unified_memory.is_none()
            && detaching.allowed
            && detaching.awaited_records <= AWAITED_RECORDS_TO_DETACH;
        let Some(traced) = self.traced.as_mut() else {
            return AfterSlot::StayAttached;
        };
        traced.switching_costs(detachable.then_some(detaching.switch_ns));
        let next = traced.slot_ended(unix, slot.0, slot.1);
        if next.slots == 1 {
            AfterSlot::TurnOn
        } else if next.detach {
            AfterSlot::Detach
        } else {
            AfterSlot::StayAttached
        }
    }

    /// The traced kinds were switched on at `unix`.
    pub fn traced_on(&mut self, unix: u64) {
        if let Some(traced) = self.traced.as_mut() {
            traced.turned_on(unix);
        }
    }

    /// A switch of the traced kinds was held back by the program's calls in flight at
    /// `unix`: it is tried again `HOLD_RETRY_NS` later.
    pub fn held_back(&mut self, unix: u64) {
        self.retry_at = unix + HOLD_RETRY_NS;
    }

    /// The unified-memory counters' switch that `Wake::unified_memory` asked for returned
    /// at `unix`: a slot lasts until its off switch returns.
    pub fn unified_memory_switched(&mut self, unix: u64) {
        if let Some(um) = self.unified_memory.as_mut() {
            if um.is_on() {
                um.slot_ended(unix, 0, 0);
            } else {
                um.turned_on(unix);
            }
        }
    }

    /// How long to sleep from `unix` until a switch is due (`u64::MAX`: none is).
    pub fn sleep_ns(&self, unix: u64) -> u64 {
        let mut sleep = u64::MAX;
        if self.launches_at_managed.is_some() && self.unified_memory.is_none() {
            sleep = UM_LAUNCH_POLL_NS;
        }
        if let Some(traced) = &self.traced {
            sleep = sleep.min(traced.wake_at().max(self.retry_at).saturating_sub(unix));
        }
        if let Some(um) = &self.unified_memory {
            sleep = sleep.min(um.wake_at().saturating_sub(unix));
        }
        sleep
    }
}

#[cfg(test)]
mod tests {
    use super::super::sampling::{ON_NS, UM_CYCLE, UM_ON_NS};
    use super::*;

    const MS: u64 = 1_000_000;

    fn woke(unix: u64) -> Woke {
        Woke {
            monotonic: unix,
            unix,
            managed_memory: false,
            launches: None,
            nccl: false,
        }
    }

    fn wake(traced: Traced) -> Wake {
        Wake {
            start_unified_memory: false,
            traced,
            unified_memory: None,
        }
    }

    const NOT_DETACHABLE: Detaching = Detaching {
        allowed: false,
        awaited_records: 0,
        switch_ns: 0,
    };

    #[test]
    fn full_capture_switches_nothing() {
        let mut s = KindSwitches::new(false, 0);
        let seen = Woke {
            managed_memory: true,
            ..woke(10 * ON_NS)
        };
        assert!(!s.wants_launches(true));
        assert_eq!(s.woke(&seen), wake(Traced::Wait));
        assert_eq!(s.sleep_ns(10 * ON_NS), u64::MAX);
    }

    #[test]
    fn the_slot_on_is_looked_at_when_due_and_goes_on_with_the_kinds_left_on_within_budget() {
        let mut s = KindSwitches::new(true, 0);
        assert_eq!(s.sleep_ns(0), ON_NS);
        assert_eq!(s.woke(&woke(ON_NS - 1)), wake(Traced::Wait));
        assert_eq!(s.sleep_ns(ON_NS - 1), 1);
        assert_eq!(s.woke(&woke(ON_NS)), wake(Traced::LookAtSlot));
        // 50 records in 20 ms are within budget: the next slot, twice as long, follows.
        assert_eq!(s.look_at_slot(ON_NS, (50, 50)), Look::NextSlot);
        // Looked at again after a base slot, and at its end 40 ms on.
        assert_eq!(s.sleep_ns(ON_NS), ON_NS);
        assert_eq!(s.woke(&woke(2 * ON_NS)), wake(Traced::LookAtSlot));
        assert_eq!(s.look_at_slot(2 * ON_NS, (10, 10)), Look::Continue);
        assert_eq!(s.sleep_ns(2 * ON_NS), ON_NS);
    }

    #[test]
    fn a_slot_over_budget_is_switched_off_and_its_rate_decides_the_cycle() {
        let mut s = KindSwitches::new(true, 0);
        assert_eq!(s.woke(&woke(ON_NS)), wake(Traced::LookAtSlot));
        assert_eq!(s.look_at_slot(ON_NS, (3_000, 3_000)), Look::TurnOff);
        // 3,000 records in 20 ms: 1 in 40, off for 39 slots.
        assert_eq!(
            s.slot_ended(ON_NS, (3_000, 3_000), &NOT_DETACHABLE),
            AfterSlot::StayAttached
        );
        assert_eq!(s.sleep_ns(ON_NS), 39 * ON_NS);
        assert_eq!(s.woke(&woke(40 * ON_NS)), wake(Traced::TurnOn));
        s.traced_on(40 * ON_NS);
        assert_eq!(s.sleep_ns(40 * ON_NS), ON_NS);
    }

    #[test]
    fn a_slot_within_budget_after_all_is_switched_on_again_at_once() {
        let mut s = KindSwitches::new(true, 0);
        // Over budget when looked at (its records so far), but its launches and records in
        // all make a cycle of one.
        assert_eq!(s.look_at_slot(ON_NS, (100, 100)), Look::TurnOff);
        assert_eq!(
            s.slot_ended(ON_NS, (75, 75), &NOT_DETACHABLE),
            AfterSlot::TurnOn
        );
        s.traced_on(ON_NS + MS);
        assert_eq!(s.sleep_ns(ON_NS + MS), ON_NS);
    }

    #[test]
    fn cupti_is_detached_only_where_allowed_with_few_records_awaited() {
        let detaching = |allowed, awaited_records| Detaching {
            allowed,
            awaited_records,
            switch_ns: 10_600_000,
        };
        // The launch-bound loop of `sampling`'s tests: detached, 1 in 107.
        for (d, after) in [
            (
                detaching(true, AWAITED_RECORDS_TO_DETACH),
                AfterSlot::Detach,
            ),
            (
                detaching(true, AWAITED_RECORDS_TO_DETACH + 1),
                AfterSlot::StayAttached,
            ),
            (detaching(false, 0), AfterSlot::StayAttached),
        ] {
            let mut s = KindSwitches::new(true, 0);
            assert_eq!(s.slot_ended(ON_NS, (2_667, 2_667), &d), after);
        }
    }

    #[test]
    fn a_held_back_switch_is_tried_again_5_ms_later() {
        let mut s = KindSwitches::new(true, 0);
        s.look_at_slot(ON_NS, (3_000, 3_000));
        s.held_back(ON_NS);
        assert_eq!(s.sleep_ns(ON_NS), 5 * MS);
        assert_eq!(s.woke(&woke(ON_NS + 5 * MS - 1)), wake(Traced::Wait));
        assert_eq!(s.woke(&woke(ON_NS + 5 * MS)), wake(Traced::LookAtSlot));
    }

    #[test]
    fn with_nccl_the_slot_starts_again_with_the_kinds_on() {
        let mut s = KindSwitches::new(true, 0);
        let seen = Woke {
            nccl: true,
            ..woke(ON_NS)
        };
        assert_eq!(s.woke(&seen), wake(Traced::Wait));
        assert_eq!(s.sleep_ns(ON_NS), ON_NS);
    }

    #[test]
    fn unified_memory_counters_start_at_the_first_launch_after_managed_memory() {
        let mut s = KindSwitches::new(true, 0);
        assert!(!s.wants_launches(false));
        assert!(s.wants_launches(true));
        let found = Woke {
            managed_memory: true,
            launches: Some(7),
            ..woke(MS)
        };
        assert_eq!(s.woke(&found), wake(Traced::Wait));
        assert!(!s.may_restart());
        // Looked for every 5 ms until then.
        assert!(s.wants_launches(true));
        assert_eq!(s.sleep_ns(MS), 5 * MS);
        let same = Woke {
            launches: Some(7),
            ..woke(6 * MS)
        };
        assert_eq!(s.woke(&same), wake(Traced::Wait));
        let launched = Woke {
            launches: Some(8),
            ..woke(11 * MS)
        };
        assert_eq!(
            s.woke(&launched),
            Wake {
                start_unified_memory: true,
                traced: Traced::Wait,
                unified_memory: None,
            }
        );
        assert!(!s.wants_launches(true));
        // The traced kinds' slot was cut to the base length; the counters' ends 20 ms on.
        assert_eq!(s.sleep_ns(11 * MS), ON_NS - 11 * MS);
        // Off at 31 ms, the switch returning 2 ms later; on again 63 slots of 22 ms after.
        let at = 11 * MS + UM_ON_NS;
        let off = s.woke(&woke(at)).unified_memory;
        assert_eq!(off, Some(false));
        s.unified_memory_switched(at + 2 * MS);
        let on_again = at + 2 * MS + (UM_CYCLE - 1) * (UM_ON_NS + 2 * MS);
        assert_eq!(s.woke(&woke(on_again - 1)).unified_memory, None);
        assert_eq!(s.woke(&woke(on_again)).unified_memory, Some(true));
        s.unified_memory_switched(on_again);
        // With the counters on, CUPTI is never detached.
        let d = Detaching {
            allowed: true,
            awaited_records: 0,
            switch_ns: 0,
        };
        let ended = on_again + MS;
        assert_eq!(s.slot_ended(ended, (0, 0), &d), AfterSlot::StayAttached);
        assert_eq!(s.sleep_ns(ended), UM_ON_NS - MS);
    }

    #[test]
    fn unified_memory_counters_start_5_s_after_managed_memory_without_a_launch() {
        let mut s = KindSwitches::new(true, 0);
        let found = Woke {
            managed_memory: true,
            launches: Some(0),
            ..woke(0)
        };
        s.woke(&found);
        let before = Woke {
            launches: Some(0),
            ..woke(UM_LAUNCH_WAIT_NS - 1)
        };
        assert!(!s.woke(&before).start_unified_memory);
        let then = Woke {
            launches: Some(0),
            ..woke(UM_LAUNCH_WAIT_NS)
        };
        assert!(s.woke(&then).start_unified_memory);
    }
}
