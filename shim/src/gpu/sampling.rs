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
//! (bench/results/gpu-2026-11-30-session7-probe): the time off is `UM_CYCLE - 1` times
//! the slot's real length, so the counters stay on 1/64 of the run however slow the
//! switch (a 2.0 s slot every 129 s there). The slot is 20 ms: 100 ms cost a 1.5 s
//! managed-memory loop +4.1 % [+0.7, +6.9] on the H200, 20 ms +2.6 % [-0.9, +4.7], with
//! faults seen as well (18 pairs, bench/results/gpu-2026-11-30-session8-detach).
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
/// bench/results/gpu-2026-11-30-session8-final).
const BUDGET_PPM: u64 = 7_500;
/// The longest cycle: one slot in 128 (2.56 s) still samples a long run densely enough;
/// the kernel counts are extrapolated by launches, exactly (`Aggregator::kernel_factor`).
pub const MAX_CYCLE: u64 = 128;
/// The unified-memory counters' slot and cycle: 20 ms on in every 1.28 s (at least: the
/// off switch lengthens the slot).
pub const UM_ON_NS: u64 = 20_000_000;
pub const UM_CYCLE: u64 = 64;

/// The cycle (in slots, one of them on) that keeps `records` per `on_ns` within budget.
/// A cycle over 1 detaches CUPTI after each slot and attaches it again for the next:
/// `switch_ns`, what that costs, counts against the budget too.
pub fn cycle_for(records: u64, on_ns: u64, switch_ns: u64) -> u64 {
    let cycle = |extra_ns: u64| {
        let cost_ns = records.saturating_mul(COST_PER_RECORD_NS) + extra_ns;
        let cost_ppm = cost_ns.saturating_mul(1_000_000) / on_ns.max(1);
        cost_ppm.div_ceil(BUDGET_PPM).clamp(1, MAX_CYCLE)
    };
    match cycle(0) {
        1 => 1,
        _ => cycle(switch_ns),
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
    /// What detaching CUPTI after a slot and attaching it for the next cost, on average.
    switch_ns: u64,
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
            switch_ns: 0,
        }
    }

    /// Detaching and attaching CUPTI again has cost `switch_ns` on average so far (0 where
    /// CUPTI stays attached). With cycles sized by their records alone, CUPTI attached
    /// again every ~0.4 s for ~10 ms on the H200's launch-bound loop, which ran +3.6 %
    /// (bench/results/gpu-2026-11-30-session8-phases).
    pub fn switching_costs(&mut self, switch_ns: u64) {
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

    /// Looked at `now`, inside a slot that is on, with `records` so far: true when the
    /// slot should end now, its rate already over budget for its whole length.
    pub fn over_budget(&mut self, now: u64, records: u64) -> bool {
        self.check_at = now + self.base_on_ns;
        self.fixed_cycle.is_none() && cycle_for(records, now.saturating_sub(self.on_since), 0) > 1
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

    /// The slot that was on ended at `now` (the kinds are off, so that gathering its
    /// records does not compete with the program while they are on) with `records`
    /// records. True: switch them on again at once, the slot was within budget.
    pub fn slot_ended(&mut self, now: u64, records: u64) -> bool {
        let length = now.saturating_sub(self.on_since);
        let cycle = self
            .fixed_cycle
            .unwrap_or_else(|| cycle_for(records, length, self.switch_ns));
        self.on = false;
        self.on_ns = if cycle == 1 {
            (self.on_ns * 2).min(MAX_ON_NS)
        } else {
            self.base_on_ns
        };
        self.next_at = now + (cycle - 1) * length.max(self.base_on_ns);
        cycle == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_cycle_keeps_cuptis_cost_within_budget() {
        // 3,750 records a second cost 2 µs each: 0.75 %, exactly the budget: always on.
        assert_eq!(cycle_for(75, ON_NS, 0), 1);
        assert_eq!(cycle_for(76, ON_NS, 0), 2);
        // A launch-bound loop, 2 launches per 15 µs: 133,333 a second, 26.7 % -> 1 in 36.
        assert_eq!(cycle_for(2_667, ON_NS, 0), 36);
        assert_eq!(cycle_for(1_000_000, ON_NS, 0), MAX_CYCLE);
        assert_eq!(cycle_for(0, 0, 0), 1);
    }

    #[test]
    fn detaching_and_attaching_count_against_the_budget_only_where_they_happen() {
        // Within budget by its records: never detached, so the switch costs nothing.
        assert_eq!(cycle_for(75, ON_NS, 10 * MS), 1);
        // The launch-bound loop above with a 10.6 ms switch (the H200's 8.7 ms attach and
        // 1.9 ms detach): 5.33 ms of records and 10.6 ms of switching per 20 ms slot, 1 in 107.
        assert_eq!(cycle_for(2_667, ON_NS, 10_600_000), 107);
        let mut d = DutyCycle::adaptive(0);
        d.switching_costs(10_600_000);
        assert!(!d.slot_ended(ON_NS, 2_667));
        assert_eq!(d.next_at(), ON_NS + 106 * ON_NS);
    }

    #[test]
    fn the_switch_stays_on_while_cheap_and_cycles_when_not() {
        let mut d = DutyCycle::adaptive(0);
        assert!(d.is_on());
        assert_eq!(d.next_at(), ON_NS);
        // 50 records in a slot: within budget, on again at once for twice as long.
        assert!(d.slot_ended(ON_NS, 50));
        d.turned_on(ON_NS);
        assert_eq!(d.next_at(), 3 * ON_NS);
        // 3,000 in that 40 ms slot: cycle 20, off for 19 times its length, and on again
        // for a slot of the first length.
        assert!(!d.slot_ended(3 * ON_NS, 3_000));
        assert!(!d.is_on());
        assert_eq!(d.next_at(), 3 * ON_NS + 19 * 2 * ON_NS);
        d.turned_on(d.next_at());
        assert_eq!(d.next_at(), 42 * ON_NS);
        // Slots grow no longer than MAX_ON_NS.
        for _ in 0..10 {
            let at = d.next_at();
            assert!(d.slot_ended(at, 0));
            d.turned_on(at);
        }
        assert_eq!(d.next_at() - d.on_since, MAX_ON_NS);
    }

    #[test]
    fn a_long_slot_is_looked_at_every_base_slot_and_ended_once_over_budget() {
        let mut d = DutyCycle::adaptive(0);
        for _ in 0..3 {
            let at = d.next_at();
            assert!(d.slot_ended(at, 0));
            d.turned_on(at);
        }
        // A 160 ms slot from 140 ms: looked at after 20 ms, before its end.
        assert_eq!((d.wake_at(), d.next_at()), (160 * MS, 300 * MS));
        // 75 records in 20 ms are within budget; 1,500 in 40 ms are not.
        assert!(!d.over_budget(160 * MS, 75));
        assert_eq!(d.wake_at(), 180 * MS);
        assert!(d.over_budget(180 * MS, 1_500));
        // Ended there, its cycle from its rate: 1,500 in 40 ms is 1 in 10, so 9 x 40 ms off.
        assert!(!d.slot_ended(180 * MS, 1_500));
        assert_eq!(d.next_at(), 180 * MS + 9 * 40 * MS);
        assert_eq!(d.wake_at(), d.next_at());
    }

    #[test]
    fn unified_memory_counters_cycle_at_a_fixed_rate() {
        let mut d = DutyCycle::unified_memory(0);
        assert!(!d.slot_ended(UM_ON_NS, 0));
        assert_eq!(d.next_at(), UM_CYCLE * UM_ON_NS);
        // An off switch that took 2 s (the H200's): the slot was 2.02 s, off 63 x that.
        d.turned_on(d.next_at());
        let ended = d.next_at() + 2_000 * MS;
        assert!(!d.slot_ended(ended, 0));
        assert_eq!(d.next_at(), ended + 63 * 2_020 * MS);
    }
}
