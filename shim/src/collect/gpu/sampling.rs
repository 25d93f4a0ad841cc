//! The default CUPTI mode: the activity kinds are on in duty cycles, one slot of `ON_NS`
//! in every `cycle` slots, with `cycle` chosen after each slot from the records it
//! produced, so that CUPTI's own cost stays within `BUDGET_PPM` of the program's time.
//! CUPTI costs per record (its instrumentation runs in each launch), so a job with few,
//! long kernels is recorded whole (cycle 1) and a launch-bound one is sampled.
//!
//! A slot grown long (the program was quiet) is looked at every `ON_NS` and ended early
//! once its records so far are over budget: a launch-bound loop starting inside a 160 ms
//! slot was recorded whole for up to that long, a third of a 0.5 s loop on the H200.
//!
//! Unified-memory counters have a cycle of their own, fixed: on the H200 they cost a
//! managed-memory loop +60 % while on (bench/results/gpu-2026-11-30-sampling-1), so they
//! are on for one slot in `UM_CYCLE`. A slot lasts until its off switch returns, which
//! took 14-22 ms in that run and 2.0 s in every one of 8 in a later one
//! (bench/results/gpu-2026-11-30-run7-probe): the time off is `UM_CYCLE - 1` times
//! the slot's real length, so the counters stay on 1/64 of the run however slow the
//! switch (a 2.0 s slot every 129 s there). The slot is 20 ms: 100 ms cost a 1.5 s
//! managed-memory loop +4.1 % [+0.7, +6.9] on the H200, 20 ms +2.6 % [-0.9, +4.7], with
//! faults seen as well (18 pairs, bench/results/gpu-2026-11-30-run8-detach).
//!
//! Every cycle counts its slot as long as it really was: a slot ended late (a starved
//! thread) or grown long is followed by as many times its length off.

/// How long the kinds stay on in each cycle: two windows of the timeline's first width.
pub const ON_NS: u64 = 20_000_000;
/// A slot within budget is followed by one twice as long, up to this: a job that is
/// cheap to record is switched (and flushed) a few times a second, not 50.
pub const MAX_ON_NS: u64 = 160_000_000;
/// What one kernel record costs the program: 1.1 µs per launch measured in-process,
/// 1.8-2.1 µs per launch in paired process runs on the H200 (docs/overhead.md).
const COST_PER_RECORD_NS: u64 = 2_000;
/// CUPTI's share of the program's time at most: 0.75 %. The host side takes ~1 % of a
/// launch-bound loop (2 launches of ~60 ns added per 12-15 µs), and with 1.5 % here the
/// H200's launch-bound loop ran +2.87 % [+0.67, +4.89] (25 pairs,
/// bench/results/gpu-2026-11-30-run8-final).
const BUDGET_PPM: u64 = 7_500;
/// The longest cycle: one slot in 128 (2.56 s) still samples a long run densely enough;
/// the kernel counts are extrapolated by launches, exactly (`Aggregator::kernel_factor`).
pub const MAX_CYCLE: u64 = 128;
/// The unified-memory counters' slot and cycle: 20 ms on in every 1.28 s (at least: the
/// off switch lengthens the slot).
pub const UM_ON_NS: u64 = 20_000_000;
pub const UM_CYCLE: u64 = 64;

/// With managed memory the kernel kind costs the program time, not records: a loop whose
/// kernels fault on managed pages ran +5.4 % [-0.5, +10.8] with it on and -0.4 % with the
/// traced kinds never on (25 pairs; bench/results/gpu-2026-12-01-run10-managed).
const MANAGED_COST_PPM: u64 = 54_000;
/// So the kinds are on one slot in this many once the program has managed memory: 8.
pub const MANAGED_CYCLE: u64 = MANAGED_COST_PPM.div_ceil(BUDGET_PPM);

/// Kernel records still awaited at a slot's end, at most, for CUPTI to be detached: the
/// last launches of a launch-bound loop, and one at each switch's edge, whose kernel
/// starts after the kinds are off; not a queue of long kernels (`duty::KindSwitches::slot_ended`).
pub const AWAITED_RECORDS_TO_DETACH: u64 = 64;

/// What an attached CUPTI costs each launch once a traced kind has been on, whether the
/// kinds are on or off: ~0.7 µs on the H200 (bench/results/gpu-2026-11-30-run8-probe).
const ATTACHED_COST_PER_LAUNCH_NS: u64 = 700;

/// The next cycle: its length in slots (one of them on), and whether CUPTI is detached
/// for the slots off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cycle {
    pub slots: u64,
    pub detach: bool,
}

/// The cycle that keeps a slot of `on_ns` with `records` and `launches` within budget.
/// While off, CUPTI either stays attached, which costs each launch
/// `ATTACHED_COST_PER_LAUNCH_NS`, or is detached and attached again for the next slot,
/// which costs `switch_ns` (None: CUPTI cannot be detached); the cheaper way, the longer
/// cycle of the two. Detached always, a program launching a few thousand kernels a second
/// whose start-up slot was over budget went unrecorded for 1.6 s after it: its own
/// launches would have cost it 0.1 % with CUPTI attached (bench/gpu/truth.sh's paced loop,
/// bench/results/gpu-2026-11-30-run9-default).
pub fn cycle_for(records: u64, launches: u64, on_ns: u64, switch_ns: Option<u64>) -> Cycle {
    let record_ns = records.saturating_mul(COST_PER_RECORD_NS);
    let budget_ns = on_ns.saturating_mul(BUDGET_PPM) / 1_000_000;
    let slots = |cost_ns: u64| cost_ns.div_ceil(budget_ns.max(1)).clamp(1, MAX_CYCLE);
    let attached = |slots| Cycle {
        slots,
        detach: false,
    };
    if slots(record_ns) == 1 {
        return attached(1);
    }
    // Attached, each slot off costs the launches of a slot: the cycle n of the budget,
    // record_ns + (n - 1) * per_slot <= n * budget_ns, exists only where per_slot is less.
    let per_slot = launches.saturating_mul(ATTACHED_COST_PER_LAUNCH_NS);
    let staying = (per_slot < budget_ns)
        .then(|| {
            record_ns
                .saturating_sub(per_slot)
                .div_ceil(budget_ns - per_slot)
        })
        .filter(|&n| n <= MAX_CYCLE)
        .map(|n| n.max(1));
    let detaching = switch_ns.map(|s| slots(record_ns + s));
    match (staying, detaching) {
        (Some(n), Some(d)) if d < n => Cycle {
            slots: d,
            detach: true,
        },
        (Some(n), _) => attached(n),
        (None, Some(d)) => Cycle {
            slots: d,
            detach: true,
        },
        // Never detached (managed memory, CUDA graphs): sized by its records.
        (None, None) => attached(slots(record_ns)),
    }
}

/// The switch's state: on or off, and when to look again.
pub struct DutyCycle {
    /// The slot's length: `base_on_ns`, grown while slots stay within budget.
    on_ns: u64,
    base_on_ns: u64,
    /// None: the cycle follows the record rate.
    fixed_cycle: Option<u64>,
    on: bool,
    on_since: u64,
    next_at: u64,
    /// While on: when to look at the records so far, before `next_at` in a long slot.
    check_at: u64,
    /// What detaching CUPTI after a slot and attaching it again for the next cost, on
    /// average; None where CUPTI cannot be detached.
    switch_ns: Option<u64>,
}

impl DutyCycle {
    /// The traced kinds' switch, on from `now`.
    pub fn adaptive(now: u64) -> DutyCycle {
        DutyCycle::starting(now, ON_NS, None)
    }

    /// The unified-memory counters' switch, on from `now`.
    pub fn unified_memory(now: u64) -> DutyCycle {
        DutyCycle::starting(now, UM_ON_NS, Some(UM_CYCLE))
    }

    fn starting(now: u64, on_ns: u64, fixed_cycle: Option<u64>) -> DutyCycle {
        DutyCycle {
            on_ns,
            base_on_ns: on_ns,
            fixed_cycle,
            on: true,
            on_since: now,
            next_at: now + on_ns,
            check_at: now + on_ns,
            switch_ns: None,
        }
    }

    /// Detaching and attaching CUPTI again costs `switch_ns` on average (None where CUPTI
    /// cannot be detached). With cycles sized by their records alone, CUPTI attached again
    /// every ~0.4 s for ~10 ms on the H200's launch-bound loop, which ran +3.6 %
    /// (bench/results/gpu-2026-11-30-run8-phases).
    pub fn switching_costs(&mut self, switch_ns: Option<u64>) {
        self.switch_ns = switch_ns;
    }

    pub fn next_at(&self) -> u64 {
        self.next_at
    }

    /// When the switch wants to be looked at: the slot's end, or a check inside it.
    pub fn wake_at(&self) -> u64 {
        if self.on {
            self.next_at.min(self.check_at)
        } else {
            self.next_at
        }
    }

    /// Looked at `now`, inside a slot that is on or at its end, with `records` so far: true
    /// when the kinds should go off now: at the slot's end in a fixed cycle, else once the
    /// slot's rate is over budget for its length.
    pub fn ends_now(&mut self, now: u64, records: u64) -> bool {
        self.check_at = now + self.base_on_ns;
        let length = now.saturating_sub(self.on_since);
        match self.fixed_cycle {
            Some(_) => now >= self.next_at,
            None => cycle_for(records, 0, length, None).slots > 1,
        }
    }

    /// The program has managed memory (found at `now`): from now on the slots of
    /// `base_on_ns` come one in `MANAGED_CYCLE`, whatever their records. The slot on is cut
    /// to that length, and time off to that cycle's: a start-up's slot over budget could
    /// have put the next one up to `MAX_CYCLE` slots (2.5 s) away.
    pub fn managed_memory(&mut self, now: u64) {
        self.fixed_cycle = Some(MANAGED_CYCLE);
        self.on_ns = self.base_on_ns;
        self.next_at = if self.on {
            self.next_at.min(self.on_since + self.base_on_ns)
        } else {
            self.next_at
                .min(now + (MANAGED_CYCLE - 1) * self.base_on_ns)
        };
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The kinds were switched on at `now`.
    pub fn turned_on(&mut self, now: u64) {
        self.on = true;
        self.on_since = now;
        self.next_at = now + self.on_ns;
        self.check_at = now + self.base_on_ns;
    }

    /// The slot that was on ended at `now` with `records` records and `launches` made.
    /// The next cycle: 1 slot, the next slot follows at once.
    pub fn slot_ended(&mut self, now: u64, records: u64, launches: u64) -> Cycle {
        let length = now.saturating_sub(self.on_since);
        let cycle = match self.fixed_cycle {
            Some(slots) => Cycle {
                slots,
                detach: false,
            },
            None => cycle_for(records, launches, length, self.switch_ns),
        };
        self.on = false;
        self.on_ns = if cycle.slots == 1 {
            (self.on_ns * 2).min(MAX_ON_NS)
        } else {
            self.base_on_ns
        };
        self.next_at = now + (cycle.slots - 1) * length.max(self.base_on_ns);
        cycle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn attached(slots: u64) -> Cycle {
        Cycle {
            slots,
            detach: false,
        }
    }

    fn detached(slots: u64) -> Cycle {
        Cycle {
            slots,
            detach: true,
        }
    }

    #[test]
    fn the_cycle_keeps_cuptis_cost_within_budget() {
        // 3,750 records a second cost 2 µs each: 0.75 %, exactly the budget: always on.
        assert_eq!(cycle_for(75, 75, ON_NS, None), attached(1));
        assert_eq!(cycle_for(76, 76, ON_NS, None), attached(2));
        // Never detached (managed memory): a launch-bound loop, 2 launches per 15 µs,
        // 133,333 a second, 26.7 % -> 1 in 36.
        assert_eq!(cycle_for(2_667, 2_667, ON_NS, None), attached(36));
        assert_eq!(
            cycle_for(1_000_000, 1_000_000, ON_NS, None),
            attached(MAX_CYCLE)
        );
        assert_eq!(cycle_for(0, 0, 0, None), attached(1));
    }

    #[test]
    fn cupti_is_detached_between_slots_only_where_that_is_cheaper() {
        // Within budget by its records: never off, so never detached.
        assert_eq!(cycle_for(75, 75, ON_NS, Some(10 * MS)), attached(1));
        // The launch-bound loop above with the H200's 10.6 ms switch (8.7 ms attach, 1.9 ms
        // detach). Attached, a slot off would cost its 2,667 launches 1.87 ms, over the
        // 0.15 ms budget of a slot: detached, 5.33 ms of records and 10.6 ms of switching
        // per 20 ms slot, 1 in 107.
        assert_eq!(
            cycle_for(2_667, 2_667, ON_NS, Some(10_600_000)),
            detached(107)
        );
        // A burst of 300 records from 40 launches (a start-up slot): attached, each slot
        // off costs 28 µs, and 1 in 5 keeps the 600 µs of records within budget; detached,
        // the switch alone would take 1 in 75.
        assert_eq!(cycle_for(300, 40, ON_NS, Some(10_600_000)), attached(5));
        // The same records from 1,000 launches: attached, the slots off alone are over
        // budget.
        assert_eq!(cycle_for(300, 1_000, ON_NS, Some(10_600_000)), detached(75));
        // A switch cheaper than staying attached: detached.
        assert_eq!(cycle_for(300, 200, ON_NS, Some(100_000)), detached(5));
        let mut d = DutyCycle::adaptive(0);
        d.switching_costs(Some(10_600_000));
        assert_eq!(d.slot_ended(ON_NS, 2_667, 2_667), detached(107));
        assert_eq!(d.next_at(), ON_NS + 106 * ON_NS);
    }

    #[test]
    fn the_switch_stays_on_while_cheap_and_cycles_when_not() {
        let mut d = DutyCycle::adaptive(0);
        assert!(d.is_on());
        assert_eq!(d.next_at(), ON_NS);
        // 50 records in a slot: within budget, on again at once for twice as long.
        assert_eq!(d.slot_ended(ON_NS, 50, 50), attached(1));
        d.turned_on(ON_NS);
        assert_eq!(d.next_at(), 3 * ON_NS);
        // 3,000 in that 40 ms slot: cycle 20, off for 19 times its length, and on again
        // for a slot of the first length.
        assert_eq!(d.slot_ended(3 * ON_NS, 3_000, 3_000).slots, 20);
        assert!(!d.is_on());
        assert_eq!(d.next_at(), 3 * ON_NS + 19 * 2 * ON_NS);
        d.turned_on(d.next_at());
        assert_eq!(d.next_at(), 42 * ON_NS);
        // Slots grow no longer than MAX_ON_NS.
        for _ in 0..10 {
            let at = d.next_at();
            assert_eq!(d.slot_ended(at, 0, 0), attached(1));
            d.turned_on(at);
        }
        assert_eq!(d.next_at() - d.on_since, MAX_ON_NS);
    }

    #[test]
    fn a_long_slot_is_looked_at_every_base_slot_and_ended_once_over_budget() {
        let mut d = DutyCycle::adaptive(0);
        for _ in 0..3 {
            let at = d.next_at();
            assert_eq!(d.slot_ended(at, 0, 0), attached(1));
            d.turned_on(at);
        }
        // A 160 ms slot from 140 ms: looked at after 20 ms, before its end.
        assert_eq!((d.wake_at(), d.next_at()), (160 * MS, 300 * MS));
        // 75 records in 20 ms are within budget; 1,500 in 40 ms are not.
        assert!(!d.ends_now(160 * MS, 75));
        assert_eq!(d.wake_at(), 180 * MS);
        assert!(d.ends_now(180 * MS, 1_500));
        // Ended there, its cycle from its rate: 1,500 in 40 ms is 1 in 10, so 9 x 40 ms off.
        assert_eq!(d.slot_ended(180 * MS, 1_500, 1_500).slots, 10);
        assert_eq!(d.next_at(), 180 * MS + 9 * 40 * MS);
        assert_eq!(d.wake_at(), d.next_at());
    }

    #[test]
    fn with_managed_memory_the_kinds_are_on_one_slot_in_eight_whatever_the_records() {
        let mut d = DutyCycle::adaptive(0);
        // Within budget, slots grow; managed memory brings them back to the base length.
        assert_eq!(d.slot_ended(ON_NS, 0, 0), attached(1));
        d.turned_on(ON_NS);
        assert_eq!(d.next_at(), 3 * ON_NS);
        // The slot on, 40 ms long, is cut to 20.
        d.managed_memory(ON_NS + ON_NS / 4);
        assert_eq!(d.next_at(), 2 * ON_NS);
        assert!(!d.ends_now(ON_NS + ON_NS / 2, 0));
        assert!(d.ends_now(2 * ON_NS, 1));
        assert_eq!(MANAGED_CYCLE, 8);
        assert_eq!(d.slot_ended(2 * ON_NS, 1, 1), attached(8));
        assert_eq!(d.next_at(), 2 * ON_NS + 7 * ON_NS);
        d.turned_on(d.next_at());
        assert_eq!(d.next_at() - d.on_since, ON_NS);
        // Found while off for 128 slots (a start-up slot over budget): off no longer than
        // a managed cycle's 7 slots from then.
        let mut d = DutyCycle::adaptive(0);
        assert_eq!(d.slot_ended(ON_NS, 10_000, 0).slots, MAX_CYCLE);
        assert_eq!(d.next_at(), ON_NS + 127 * ON_NS);
        d.managed_memory(2 * ON_NS);
        assert_eq!(d.next_at(), 2 * ON_NS + 7 * ON_NS);
        // Found just before the slot comes: it still comes then.
        let mut d = DutyCycle::adaptive(0);
        d.slot_ended(ON_NS, 10_000, 0);
        d.managed_memory(127 * ON_NS);
        assert_eq!(d.next_at(), 128 * ON_NS);
    }

    #[test]
    fn unified_memory_counters_cycle_at_a_fixed_rate() {
        let mut d = DutyCycle::unified_memory(0);
        assert_eq!(d.slot_ended(UM_ON_NS, 0, 0), attached(UM_CYCLE));
        assert_eq!(d.next_at(), UM_CYCLE * UM_ON_NS);
        // An off switch that took 2 s (the H200's): the slot was 2.02 s, off 63 x that.
        d.turned_on(d.next_at());
        let ended = d.next_at() + 2_000 * MS;
        assert_eq!(d.slot_ended(ended, 0, 0), attached(UM_CYCLE));
        assert_eq!(d.next_at(), ended + 63 * 2_020 * MS);
    }
}
