//! The DUT's CPU cost per load step: while a UDP test runs, the watched
//! DUT agent (the lab's) is asked for a snapshot every 250 ms; each sender
//! interval, and the sending phase as a whole, becomes a
//! [`DutStep`] between the DUT's counters interpolated at its two ends.
//! The arithmetic lives in [`crate::host::efficiency`]; this file only
//! takes the readings and lines them up with the senders' clock.

use super::setup::{Ends, Leg};
use crate::host::efficiency::{
    dut_method, dut_reading, dut_step, reading_at, stall_between, steal_between, DutReading,
    StealTicks,
};
use crate::model::spill::Spill;
use crate::proto::{Request, Response, Snapshot};
use crate::results::TestResult;
use crate::topology::Agents;
use std::time::{Duration, Instant};

/// How often the DUT is read: often enough that interpolating to an
/// interval's edges errs by little, seldom enough to cost it nothing.
const EVERY: Duration = Duration::from_millis(250);

/// A reading as spilled: (t_s, cpu_ns, tx_packets, clock_hz, energy_uj).
type Spilled = (f64, f64, f64, Option<f64>, Option<f64>);

/// Readings of one DUT agent over a test. They wait in a scratch file
/// (four a second, for as long as the test runs) until the result is put
/// together.
pub(super) struct DutWatch {
    agent: Option<usize>,
    next: Instant,
    readings: Option<Spill<Spilled>>,
    /// Each reading's steal per CPU, for the hypervisor's share in a step.
    steal: Option<Spill<(f64, StealTicks)>>,
    /// Each reading's stall-watch total over the host's CPUs, ns, where
    /// the DUT's agent watches ([`crate::host::stalls`]).
    stalls: Option<Spill<(f64, u64)>>,
    first: Option<Snapshot>,
    /// Failed reads: how many, and the first one's reason.
    failed: (usize, Option<String>),
}

impl DutWatch {
    /// Watches `agent`: the first observer of a test's ends (the lab's
    /// DUT); `None` watches nothing. The readings' scratch file goes in
    /// `results_dir` (the temp directory without one).
    pub fn new(agent: Option<usize>, results_dir: Option<&std::path::Path>) -> Self {
        DutWatch {
            agent,
            next: Instant::now(),
            readings: agent.map(|_| Spill::new("the DUT's CPU readings", results_dir)),
            steal: agent.map(|_| Spill::new("the DUT's steal readings", results_dir)),
            stalls: agent.map(|_| Spill::new("the DUT's stall readings", results_dir)),
            first: None,
            failed: (0, None),
        }
    }

    fn failed(&mut self, why: String) {
        self.failed.0 += 1;
        self.failed.1.get_or_insert(why);
    }

    /// Reads the DUT when its time has come.
    pub fn tick(&mut self, fleet: &mut dyn Agents) {
        if fleet.now() >= self.next {
            self.read(fleet);
        }
    }

    /// Reads the DUT now. A failed read is noted, not fatal: the test's
    /// own figures do not depend on it.
    pub fn read(&mut self, fleet: &mut dyn Agents) {
        let Some(agent) = self.agent else { return };
        self.next = fleet.now() + EVERY;
        let t0 = fleet.unix_ns();
        match fleet.call(agent, &Request::Snapshot, Duration::from_secs(2)) {
            Ok(Response::Snapshot { snapshot }) => {
                // The agent read its counters somewhere inside the round trip.
                let t1 = fleet.unix_ns();
                let t_s = (t0 as f64 + t1 as f64) / 2.0 / 1e9;
                let r = dut_reading(&snapshot, t_s);
                if let Some(spill) = &mut self.readings {
                    spill.push((r.t_s, r.cpu_ns, r.tx_packets, r.clock_hz, r.energy_uj));
                }
                if let Some(spill) = &mut self.steal {
                    let ticks = snapshot.per_cpu.iter().map(|c| (c.cpu, c.steal)).collect();
                    spill.push((t_s, ticks));
                }
                let watched = snapshot.per_cpu.iter().filter_map(|c| c.stalled_ns);
                let held = watched.clone().next().map(|_| watched.sum::<u64>());
                if let (Some(spill), Some(ns)) = (&mut self.stalls, held) {
                    spill.push((t_s, ns));
                }
                self.first.get_or_insert(snapshot);
            }
            Ok(other) => self.failed(format!("unexpected answer {other:?}")),
            Err(e) => self.failed(format!("{e:#}")),
        }
    }

    /// Puts the DUT's step on every sender interval of `result` and the
    /// sending phase's on `result.dut_efficiency`. `legs` are in the order
    /// of `result.directions`.
    pub fn record(mut self, ends: &Ends, legs: &[Leg], result: &mut TestResult) {
        let Some(first) = &self.first else { return };
        let mut eff = dut_method(first);
        if let (n, Some(why)) = &self.failed {
            eff.notes.push(format!(
                "{n} of the DUT's snapshots failed (steps around them are interpolated over the gap): {why}"
            ));
        }
        let mut readings: Vec<DutReading> = Vec::new();
        if let Some(spill) = &mut self.readings {
            spill.for_each(|(t_s, cpu_ns, tx_packets, clock_hz, energy_uj)| {
                readings.push(DutReading {
                    t_s,
                    cpu_ns,
                    tx_packets,
                    clock_hz,
                    energy_uj,
                })
            });
        }
        let mut steals: Vec<(f64, StealTicks)> = Vec::new();
        if let Some(spill) = &mut self.steal {
            spill.for_each(|x| steals.push(x));
        }
        let mut stalls: Vec<(f64, u64)> = Vec::new();
        if let Some(spill) = &mut self.stalls {
            spill.for_each(|x| stalls.push(x));
        }
        let r = &readings;
        let (mut begin, mut end) = (f64::MAX, f64::MIN);
        for (leg, d) in legs.iter().zip(result.directions.iter_mut()) {
            let started = d.sender_summary.started_unix_ns;
            if started == 0 {
                continue;
            }
            let start_s = ends
                .fleet
                .agent(leg.tx_agent)
                .clock
                .to_controller_ns(started) as f64
                / 1e9;
            begin = begin.min(start_s);
            end = end.max(start_s + d.duration_s);
            for p in &mut d.intervals {
                let Some(s) = &p.sender else { continue };
                let received = p.receiver.as_ref().map_or(0, |r| r.rx_packets);
                if let (Some(a), Some(b)) = (
                    reading_at(r, start_s + s.t_start),
                    reading_at(r, start_s + s.t_end),
                ) {
                    let mut step = dut_step(&a, &b, received);
                    step.steal_ms = steal_between(&steals, a.t_s, b.t_s);
                    step.stall_ms = stall_between(&stalls, a.t_s, b.t_s);
                    p.dut = Some(step);
                }
            }
        }
        let received: u64 = result.directions.iter().map(|d| d.rx_packets).sum();
        if let (Some(a), Some(b)) = (reading_at(r, begin), reading_at(r, end)) {
            eff.test = Some(dut_step(&a, &b, received));
        }
        result.dut_efficiency = Some(eff);
    }
}
