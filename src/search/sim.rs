//! A deterministic simulated DUT behind [`TrialRunner`]: a seeded RNG, a
//! clock that only moves by the trials and waits it is asked for, a
//! forwarding capacity with per-trial jitter, tail drop above it, and an
//! optional random-loss floor that separates NDR from PDR.
//!
//! The model's noiseless truth ([`SimDut::true_throughput`]) is what tests
//! hold the searches to.

use super::ramp::{RampSample, RampSpec};
use super::{TrialError, TrialOutcome, TrialRunner, WaitPhase};
use std::time::Duration;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, seedable, good enough for noise.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [-1, 1).
    fn symmetric(&mut self) -> f64 {
        self.next_f64() * 2.0 - 1.0
    }
}

/// How the simulated DUT behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    /// Mean forwarding capacity, packets/s: above it, the excess is dropped.
    pub capacity_pps: f64,
    /// Per-trial capacity jitter, relative: each trial's capacity is uniform
    /// in `capacity × (1 ± jitter)`.
    pub capacity_jitter: f64,
    /// Packets the DUT can buffer: a trial of `d` seconds forwards up to
    /// `capacity × d + buffer` (short trials look better, as with real
    /// buffers).
    pub buffer_packets: f64,
    /// Share of packets lost at random once the rate passes
    /// `loss_floor_onset_pps` (e.g. 0.002): NDR stops at the onset while PDR
    /// (0.5 %) goes on to the capacity.
    pub loss_floor_ratio: f64,
    pub loss_floor_onset_pps: f64,
    /// The tester cannot send faster than this (its own limit, not the DUT's).
    pub tester_max_pps: Option<f64>,
    /// A tester that loses to its own scheduler: each trial offers the rate
    /// asked less a share uniform in `[0, tester_shortfall)` (0.06: up to
    /// 6 % short at any rate), as a paced generator preempted on a shared
    /// core does.
    pub tester_shortfall: f64,
    /// A tester asked for more than [`SimConfig::tester_max_pps`] offers
    /// that much less a share uniform in `[0, tester_wander)`: an unpaced
    /// generator at its limit, whose offer differs from trial to trial.
    pub tester_wander: f64,
    /// A DUT on a virtual machine whose CPU the hypervisor takes away now
    /// and then: each trial, with this probability, the DUT forwards
    /// nothing for [`SimConfig::stall_s`] (the frames of that time are
    /// lost) and the trial reports that much steal.
    pub stall_chance: f64,
    pub stall_s: f64,
    /// Seconds each trial keeps counting after sending stops (RFC 2544 §23 d);
    /// added to the clock.
    pub tail_s: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            capacity_pps: 1_000_000.0,
            capacity_jitter: 0.0,
            buffer_packets: 0.0,
            loss_floor_ratio: 0.0,
            loss_floor_onset_pps: f64::INFINITY,
            tester_max_pps: None,
            tester_shortfall: 0.0,
            tester_wander: 0.0,
            stall_chance: 0.0,
            stall_s: 0.0,
            tail_s: 0.0,
        }
    }
}

/// The simulated DUT and its clock.
#[derive(Debug, Clone)]
pub struct SimDut {
    pub config: SimConfig,
    rng: SplitMix64,
    clock_s: f64,
    trials: u64,
    trial_time_s: f64,
}

impl SimDut {
    pub fn new(config: SimConfig) -> Self {
        SimDut {
            config,
            rng: SplitMix64(config.seed),
            clock_s: 0.0,
            trials: 0,
            trial_time_s: 0.0,
        }
    }

    /// Simulated time so far: trials, tails and waits, seconds.
    pub fn clock_s(&self) -> f64 {
        self.clock_s
    }

    pub fn trials(&self) -> u64 {
        self.trials
    }

    /// Sum of trial durations only, seconds.
    pub fn trial_time_s(&self) -> f64 {
        self.trial_time_s
    }

    /// Expected lost packets of a trial given the capacity it met.
    fn expected_lost(&self, offered_pps: f64, duration_s: f64, capacity_pps: f64) -> f64 {
        let tx = offered_pps * duration_s;
        let forwardable = capacity_pps * duration_s + self.config.buffer_packets;
        let tail_drop = (tx - forwardable).max(0.0);
        let floor = if offered_pps > self.config.loss_floor_onset_pps {
            (tx - tail_drop) * self.config.loss_floor_ratio
        } else {
            0.0
        };
        tail_drop + floor
    }

    /// Noiseless loss ratio at a rate (mean capacity, mean floor).
    pub fn model_loss_ratio(&self, rate_pps: f64, duration_s: f64) -> f64 {
        if rate_pps <= 0.0 {
            return 0.0;
        }
        self.expected_lost(rate_pps, duration_s, self.config.capacity_pps) / (rate_pps * duration_s)
    }

    /// Highest rate whose noiseless loss ratio is at most `loss_ratio`, for
    /// trials of `duration_s`: the value a search for that goal should find.
    /// The tester's own limit is not applied.
    pub fn true_throughput(&self, loss_ratio: f64, duration_s: f64) -> f64 {
        let (mut lo, mut hi) = (0.0, self.config.capacity_pps * 1e3);
        for _ in 0..200 {
            let mid = (lo + hi) / 2.0;
            if self.model_loss_ratio(mid, duration_s) <= loss_ratio {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Runs a ramp at one-second intervals, returning one direction's
    /// samples: the offered rate of a second is the schedule at its middle.
    pub fn ramp_samples(&mut self, spec: &RampSpec) -> Vec<RampSample> {
        let seconds = spec.total_s().ceil() as usize;
        (0..seconds)
            .filter_map(|i| {
                let t = i as f64;
                let phase = spec.phase_at(t)?;
                let intended = spec.rate_at(t + 0.5);
                let o = self.simulate(intended, 1.0);
                Some(RampSample {
                    t_s: t,
                    phase,
                    intended_pps: intended,
                    offered_pps: o.offered_pps,
                    received_pps: o.rx_packets as f64,
                    loss_ratio: o.loss_ratio(),
                    tester_limited: o.tester_limited,
                    dut: None,
                    rerun: false,
                })
            })
            .collect()
    }

    fn simulate(&mut self, rate_pps: f64, duration_s: f64) -> TrialOutcome {
        let c = self.config;
        let (mut offered, mut short) = match c.tester_max_pps {
            Some(max) if rate_pps > max => {
                (max * (1.0 - c.tester_wander * self.rng.next_f64()), true)
            }
            _ => (rate_pps.max(0.0), false),
        };
        if c.tester_shortfall > 0.0 {
            let share = c.tester_shortfall * self.rng.next_f64();
            offered *= 1.0 - share;
            // As the runner's rule: short by at least 1 % of what was asked.
            short |= share >= 0.01;
        }
        let capacity = c.capacity_pps * (1.0 + c.capacity_jitter * self.rng.symmetric());
        let tx = (offered * duration_s).round();
        let tail_drop = (tx - (capacity * duration_s + c.buffer_packets)).max(0.0);
        // The floor is random around its mean: half to one and a half times.
        let floor = if offered > c.loss_floor_onset_pps {
            (tx - tail_drop) * c.loss_floor_ratio * (0.5 + self.rng.next_f64())
        } else {
            0.0
        };
        let stalled = c.stall_chance > 0.0 && self.rng.next_f64() < c.stall_chance;
        let stall_lost = if stalled {
            offered * c.stall_s.min(duration_s)
        } else {
            0.0
        };
        let lost = (tail_drop + floor + stall_lost).round().min(tx);
        let (tx, lost) = (tx as u64, lost as u64);
        self.trials += 1;
        self.trial_time_s += duration_s;
        self.clock_s += duration_s + c.tail_s;
        TrialOutcome {
            rate_pps,
            offered_pps: offered,
            duration_s,
            tx_packets: tx,
            rx_packets: tx - lost,
            lost,
            tester_short: short,
            tester_limited: TrialOutcome::tester_verdict(short, lost),
            dut_counted_lost: None,
            dut: None,
            steal_ms: stalled.then_some(c.stall_s * 1e3),
            stall_ms: None,
            host_lost: None,
        }
    }
}

/// A DUT with a buffer for back-to-back bursts: frames arrive at
/// `burst_pps`, leave at `forward_pps`, and the buffer holds
/// `buffer_frames`; a burst of N leaves N × (1 − forward/burst) queued at
/// its end, and loses what does not fit. No noise: its truth is
/// ⌊buffer / (1 − forward/burst)⌋ frames.
#[derive(Debug, Clone)]
pub struct SimBuffer {
    pub buffer_frames: f64,
    pub forward_pps: f64,
    pub burst_pps: f64,
    /// The tester sends at most this many frames whole (none: any).
    pub tester_most: Option<u64>,
}

impl SimBuffer {
    pub fn new(buffer_frames: f64, forward_pps: f64, burst_pps: f64) -> Self {
        SimBuffer {
            buffer_frames,
            forward_pps,
            burst_pps,
            tester_most: None,
        }
    }
}

impl super::b2b::BurstRunner for SimBuffer {
    fn burst(&mut self, frames: u64) -> Result<super::b2b::BurstOutcome, TrialError> {
        let short = self.tester_most.is_some_and(|m| frames > m);
        let sent = if short { frames / 2 } else { frames };
        let kept = (1.0 - self.forward_pps / self.burst_pps).max(0.0);
        let lost = (sent as f64 * kept - self.buffer_frames).ceil().max(0.0) as u64;
        Ok(super::b2b::BurstOutcome {
            frames,
            tx_packets: sent,
            rx_packets: sent - lost.min(sent),
            lost: lost.min(sent),
            tester_drops: 0,
            send_s: sent as f64 / self.burst_pps,
            tester_short: short,
        })
    }
}

impl TrialRunner for SimDut {
    fn trial(&mut self, rate_pps: f64, duration: Duration) -> Result<TrialOutcome, TrialError> {
        Ok(self.simulate(rate_pps, duration.as_secs_f64()))
    }

    fn wait(&mut self, _phase: WaitPhase, duration: Duration) -> Result<(), TrialError> {
        self.clock_s += duration.as_secs_f64();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_outcomes() {
        let cfg = SimConfig {
            capacity_jitter: 0.01,
            loss_floor_ratio: 0.002,
            loss_floor_onset_pps: 500_000.0,
            ..SimConfig::default()
        };
        let run = |seed| {
            let mut d = SimDut::new(SimConfig { seed, ..cfg });
            (0..20)
                .map(|i| d.simulate(600_000.0 + 30_000.0 * i as f64, 1.0).lost)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn loss_curve_and_truth() {
        let mut d = SimDut::new(SimConfig {
            loss_floor_ratio: 0.002,
            loss_floor_onset_pps: 800_000.0,
            ..SimConfig::default()
        });
        // Below the onset: nothing lost.
        assert_eq!(d.simulate(700_000.0, 1.0).lost, 0);
        // Between onset and capacity: the floor only (0.1 .. 0.3 %).
        let o = d.simulate(900_000.0, 1.0);
        assert!((0.001..0.003).contains(&o.loss_ratio()), "{o:?}");
        // Above capacity: the excess is dropped.
        let o = d.simulate(2_000_000.0, 1.0);
        assert!((o.loss_ratio() - 0.501).abs() < 0.002, "{o:?}");
        // NDR is the onset; PDR where tail drop plus the floor on what is
        // forwarded reach 0.5 %: (r − 0.998 c) / r = 0.005.
        assert!((d.true_throughput(0.0, 1.0) - 800_000.0).abs() < 1e-3);
        let pdr = d.true_throughput(0.005, 1.0);
        assert!((pdr - 1e6 * 0.998 / 0.995).abs() < 1e-3, "{pdr}");
    }

    #[test]
    fn buffer_helps_short_trials_and_tester_limit_is_flagged() {
        let mut d = SimDut::new(SimConfig {
            buffer_packets: 10_000.0,
            tester_max_pps: Some(1_500_000.0),
            tail_s: 2.0,
            ..SimConfig::default()
        });
        assert_eq!(d.simulate(1_005_000.0, 1.0).lost, 0);
        assert!(d.simulate(1_005_000.0, 10.0).lost > 0);
        let o = d.simulate(2_000_000.0, 1.0);
        // Short, and the DUT (1 Mpps) lost frames: DUT evidence, not the tester's limit.
        assert!(o.tester_short && !o.tester_limited && o.lost > 0);
        assert_eq!(o.offered_pps, 1_500_000.0);
        // 1 + 10 + 1 s of trials, a 2 s tail after each.
        assert_eq!(d.clock_s(), 12.0 + 3.0 * 2.0);
        d.wait(WaitPhase::Learning, Duration::from_secs(2)).unwrap();
        assert_eq!(d.clock_s(), 20.0);
        assert_eq!(d.trial_time_s(), 12.0);
    }
}
