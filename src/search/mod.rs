//! Load ramps and throughput searches: pure logic over a "run a trial at
//! rate R for T" interface, testable with a simulated DUT. No I/O here.
//!
//! This module owns the *decisions*: which rate to try next, for how long,
//! when a load counts as passed or failed, where a ramp saturated, and the
//! bookkeeping of every trial and of the time spent. It must not touch
//! sockets, threads, files or clocks: durations are inputs, and time spent is
//! the sum of trial durations and configured waits. Whoever implements
//! [`TrialRunner`] does the sending, the waiting and the counting.
//!
//! - [`ramp`]: the trex-loadtest method: warmup → linear ramp → hold, and the
//!   saturation point of the per-second samples.
//! - [`viz`]: the `vars`/`stats` JSON that wejn/trex-loadtest-viz plots.
//! - [`rfc2544`]: RFC 2544 throughput (binary search, §26.1) and frame loss
//!   rate (§26.3), with the §23 waits.
//! - [`mlr`]: MLRsearch (RFC 9971, FD.io CSIT): several loss goals (NDR, PDR)
//!   in one search, short trials first.
//! - [`b2b`]: RFC 2544 back-to-back frames (§26.4) as RFC 9004 updates it:
//!   the longest burst the DUT forwards whole, and its buffer time.
//! - [`sim`]: a deterministic simulated DUT for tests and benchmarks (and
//!   one with a buffer for bursts).
//! - [`trial_log`]: the trials a search ran, with their waits and time
//!   spent, and the shortfalls that show a tester's ceiling.

pub mod b2b;
mod load_class;
pub mod mlr;
pub mod ramp;
pub mod rfc2544;
pub mod sim;
mod trial_log;
pub mod viz;

#[cfg(test)]
mod compare_tests;

pub use b2b::{back_to_back, BackToBackConfig, BackToBackResult, BurstOutcome, BurstRunner};
pub use mlr::{mlr_search, Irregular, MlrConfig, MlrEnd, MlrGoal, MlrGoalResult, MlrResult};
pub use ramp::{
    saturation, summarize_ramp, RampPhase, RampSample, RampSpec, RampSummary, Saturation,
    DEFAULT_SATURATION_LOSS,
};
pub use rfc2544::{
    frame_loss_rate, rfc2544_throughput, FrameLossConfig, FrameLossEnd, FrameLossResult,
    FrameLossStep, Resolution, Rfc2544Config, Rfc2544Result, ThroughputEnd,
};
pub use sim::{SimBuffer, SimConfig, SimDut};
pub(crate) use trial_log::{Shortfalls, TrialLog};
pub use viz::viz_export;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What one trial measured (per direction summed, or one direction).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrialOutcome {
    /// Rate the search asked for, packets/s.
    pub rate_pps: f64,
    /// Rate the tester actually sent, packets/s.
    pub offered_pps: f64,
    /// Length of the sending phase as measured, seconds.
    pub duration_s: f64,
    pub tx_packets: u64,
    pub rx_packets: u64,
    /// Lost packets from sequence numbers (reordered and duplicates are not
    /// loss), less what the tester itself dropped: the DUT's loss.
    pub lost: u64,
    /// The tester fell short of the rate asked (by more than counting
    /// noise): the trial measured the DUT at `offered_pps`, not at
    /// `rate_pps`.
    #[serde(default)]
    pub tester_short: bool,
    /// The tester was the limit: it fell short *and* the DUT lost nothing
    /// of what it was offered. A short trial where the DUT lost frames is
    /// DUT evidence at the offered rate ([`TrialOutcome::tester_verdict`]).
    pub tester_limited: bool,
    /// In a lab: packets the DUT namespace's own interface counters say it
    /// received and did not forward, to set beside `lost`.
    #[serde(default)]
    pub dut_counted_lost: Option<u64>,
    /// In a lab: the DUT's CPU time per packet over the trial's sending
    /// phase (what it counts is in the trial test's `dut_efficiency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut: Option<crate::host::efficiency::DutStep>,
    /// The most CPU time the hypervisor took from one CPU of the hosts
    /// taking part during the trial, ms (10 ms ticks); see
    /// [`TrialOutcome::disturbed`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ms: Option<f64>,
    /// How long the CPUs of the hosts taking part stalled during the
    /// trial, ms, summed (the stall watch, 1 ms resolution; see
    /// [`TrialOutcome::disturbed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<f64>,
    /// Frames of `lost` charged to the host, not to the DUT: set only on a
    /// trial counted although it was disturbed on every repeat
    /// ([`DISTURBED_REPEATS`]), as many as the host's stalls explain
    /// ([`TrialOutcome::host_explained`]). Loss ratios and verdicts take
    /// [`TrialOutcome::charged_lost`]; `lost` stays what the sequence
    /// numbers counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_lost: Option<u64>,
}

impl TrialOutcome {
    /// Whether a trial is the tester's limit: short of the asked rate with
    /// no DUT loss. A DUT that dropped frames at the offered rate is the
    /// limit there, whatever was asked.
    pub fn tester_verdict(tester_short: bool, lost: u64) -> bool {
        tester_short && lost == 0
    }

    /// The tester fell short of the asked rate by more than
    /// [`TESTER_BACKOFF`]: the load this trial measured is the offered one.
    pub fn short_of_asked(&self) -> bool {
        (self.tester_short || self.tester_limited)
            && self.offered_pps < self.rate_pps * (1.0 - TESTER_BACKOFF)
    }

    /// A lossy trial during which the hypervisor held a CPU of the test's
    /// hosts for at least [`STEAL_DISTURBS_MS`], and lost no more frames
    /// than the tester offered in that time (plus one tick, the counter's
    /// resolution): its loss may be the host's, not the DUT's at this load,
    /// so searches run it again. Loss beyond what the stolen time explains
    /// is the DUT's.
    ///
    /// The same for the stall watch's finer count: a lossy trial that lost
    /// no more frames than the tester offered while the host's CPUs were
    /// stalled ([`watched_stall_explains`]).
    pub fn disturbed(&self) -> bool {
        self.disturbance().is_some()
    }

    /// What disturbed the trial, for its line, when something did: the
    /// hypervisor's steal where that explains the loss, else the stall
    /// watch's count where that does.
    pub fn disturbance(&self) -> Option<String> {
        let lost = self.lost as f64;
        match (self.steal_ms, self.stall_ms) {
            (Some(ms), _) if stall_explains(lost, self.offered_pps, ms) => {
                Some(format!("the hypervisor held a CPU {ms:.0} ms"))
            }
            (_, Some(ms)) if watched_stall_explains(lost, self.offered_pps, ms) => {
                Some(format!("the host's CPUs stalled {ms:.1} ms"))
            }
            _ => None,
        }
    }

    /// How many of the lost frames a disturbed trial may charge to the
    /// host: as many as the tester offered while the host's CPUs were held
    /// (the stall watch's count, to the millisecond, or where no watch ran
    /// the hypervisor's steal), never more than were lost. Not the rule's
    /// allowance for the steal counter's 10 ms tick: a DUT with a buffer
    /// loses fewer frames in a stall than were offered in it, so what is
    /// left is the DUT's own loss or less, and a DUT that loses frames
    /// beyond a stall (over its capacity) is still charged with them.
    pub fn host_explained(&self) -> Option<u64> {
        if !self.disturbed() {
            return None;
        }
        // The watch's count where there is a watch (even 0: a steal tick
        // it did not see is the counter's rounding), else the steal.
        let held_ms = self.stall_ms.or(self.steal_ms).unwrap_or(0.0);
        let frames = (self.offered_pps * held_ms / 1e3).ceil() as u64;
        Some(frames.min(self.lost))
    }

    /// The frames lost that count against the DUT: `lost` less what was
    /// charged to the host ([`TrialOutcome::host_lost`]).
    pub fn charged_lost(&self) -> u64 {
        self.lost.saturating_sub(self.host_lost.unwrap_or(0))
    }

    /// Lost / sent, 0..1, of the frames charged to the DUT
    /// ([`TrialOutcome::charged_lost`]). A trial that sent nothing has no loss to speak of
    /// (0); searches refuse rates too low to send a frame.
    pub fn loss_ratio(&self) -> f64 {
        if self.tx_packets == 0 {
            return 0.0;
        }
        (self.charged_lost() as f64 / self.tx_packets as f64).clamp(0.0, 1.0)
    }
}

/// Runs trials against a DUT. The I/O side implements it with the UDP
/// engine; [`sim::SimDut`] implements it for tests.
///
/// Contract for RFC 2544 §23: `trial` covers phase c (sending for
/// `duration`) *and* phase d (keep counting frames that arrive up to
/// [`TrialWaits::tail_s`] after sending stopped), so the outcome includes
/// late frames. Phases a, b (before) and e (after) are asked for through
/// [`TrialRunner::wait`].
/// Why a runner could not complete a trial or a wait.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrialError {
    /// The user stopped the run (Ctrl-C, SIGTERM).
    #[error("interrupted")]
    Interrupted,
    /// The trial ran and failed (an agent went away, a job errored); the
    /// message says why.
    #[error("{0}")]
    Failed(String),
    /// A trial or wait time that no clock can take.
    #[error("{0} s is not a usable duration")]
    BadDuration(f64),
}

pub trait TrialRunner {
    /// Sends at `rate_pps` for `duration` and reports what came back.
    fn trial(&mut self, rate_pps: f64, duration: Duration) -> Result<TrialOutcome, TrialError>;

    /// A wait around a trial (routing update and learning frames before it,
    /// restabilising after it). The default does nothing; a real runner
    /// sleeps, or sends learning frames and then sleeps.
    fn wait(&mut self, phase: WaitPhase, duration: Duration) -> Result<(), TrialError> {
        let _ = (phase, duration);
        Ok(())
    }
}

/// Which RFC 2544 §23 phase a [`TrialRunner::wait`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitPhase {
    /// §23 a: the DUT is a router: send a routing update, let it settle.
    RoutingUpdate,
    /// §23 b: send learning frames (MAC, ARP/ND), let the DUT learn.
    Learning,
    /// §23 e: let the DUT restabilise after the trial.
    Restabilize,
}

/// The waits of RFC 2544 §23 around every trial, seconds. Time spent by a
/// search includes them; shorter waits than the RFC's make an RFC 2544
/// result non-compliant (RFC 9971 allows them but wants them reported).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrialWaits {
    /// §23 a: after a routing update, before the trial (2 s for a router).
    pub routing_update_s: f64,
    /// §23 b: after the learning frames, before the trial (2 s).
    pub learning_s: f64,
    /// §23 d: after sending stops, counting residual frames (2 s). Done by
    /// the runner inside `trial`; the search only accounts for it.
    pub tail_s: f64,
    /// §23 e: after the trial, for the DUT to restabilise (at least 5 s).
    pub restabilize_s: f64,
}

impl TrialWaits {
    /// The waits RFC 2544 §23 describes, for a DUT that is a router.
    pub const RFC2544: TrialWaits = TrialWaits {
        routing_update_s: 2.0,
        learning_s: 2.0,
        tail_s: 2.0,
        restabilize_s: 5.0,
    };
    /// No waits at all (simulations, or quick exploratory searches).
    pub const NONE: TrialWaits = TrialWaits {
        routing_update_s: 0.0,
        learning_s: 0.0,
        tail_s: 0.0,
        restabilize_s: 0.0,
    };

    /// Wait time one trial costs on top of its duration.
    pub fn per_trial_s(&self) -> f64 {
        self.routing_update_s + self.learning_s + self.tail_s + self.restabilize_s
    }

    /// Which of these waits are shorter than RFC 2544 asks, as notes.
    pub fn shorter_than_rfc2544(&self) -> Vec<String> {
        let rfc = Self::RFC2544;
        [
            (
                "routing update (§23 a)",
                self.routing_update_s,
                rfc.routing_update_s,
            ),
            ("learning (§23 b)", self.learning_s, rfc.learning_s),
            ("residual frames (§23 d)", self.tail_s, rfc.tail_s),
            ("restabilise (§23 e)", self.restabilize_s, rfc.restabilize_s),
        ]
        .into_iter()
        .filter(|(_, got, want)| got < want)
        .map(|(what, got, want)| format!("{what} wait is {got} s, RFC 2544 asks for {want} s"))
        .collect()
    }

    fn validate(&self) -> Result<(), SearchError> {
        let all = [
            self.routing_update_s,
            self.learning_s,
            self.tail_s,
            self.restabilize_s,
        ];
        if all.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err(SearchError::Config(format!(
                "waits must be finite and >= 0 seconds, got {self:?}"
            )));
        }
        Ok(())
    }
}

/// One trial a search ran, as it goes into results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchTrial {
    /// 0-based, in the order the trials ran.
    pub index: usize,
    /// Intended rate, packets/s.
    pub rate_pps: f64,
    /// Intended duration of the sending phase, seconds.
    pub duration_s: f64,
    pub outcome: TrialOutcome,
    /// What the search wanted to learn: e.g. `bisect`, `max rate`,
    /// `pdr 2/3: extend down`.
    pub purpose: String,
    /// The goal whose phase chose this trial (MLRsearch: every trial still
    /// informs every goal), if any.
    pub goal: Option<String>,
    /// Whether the trial was used as evidence about the DUT. Every trial is
    /// now: a tester-limited one counts at the load the tester could offer
    /// (kept for readers of older results, where such trials were dropped).
    pub counted: bool,
    /// Configured waits around this trial, seconds.
    pub wait_s: f64,
    /// Search time at the end of this trial and its waits, seconds.
    pub elapsed_s: f64,
}

/// Why a search could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The configuration cannot describe a search; the message says which
    /// value and what would work.
    #[error("invalid search configuration: {0}")]
    Config(String),
    /// The runner failed a trial or a wait; the trials that completed before
    /// are kept so the caller can still record them.
    #[error("trial {index} at {rate_pps:.0} pps for {duration_s} s failed: {message}")]
    Trial {
        index: usize,
        rate_pps: f64,
        duration_s: f64,
        message: String,
        completed: Vec<SearchTrial>,
    },
}

/// One search goal's answer over repetitions of the same search: how much
/// it moves from run to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GoalSpread {
    /// The search's name (`search PROFILE`).
    pub search: String,
    pub goal: String,
    /// Each repetition's answer, packets/s, in run order.
    pub values_pps: Vec<f64>,
    pub median_pps: f64,
    pub min_pps: f64,
    pub max_pps: f64,
    /// Half the range over the median, %: "± this much".
    pub spread_pct: f64,
}

impl GoalSpread {
    /// The spread of `values` (at least one), or `None` for none.
    pub fn of(search: &str, goal: &str, values: &[f64]) -> Option<GoalSpread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let (min, max) = (v[0], v[n - 1]);
        Some(GoalSpread {
            search: search.to_string(),
            goal: goal.to_string(),
            values_pps: values.to_vec(),
            median_pps: median,
            min_pps: min,
            max_pps: max,
            spread_pct: if median > 0.0 {
                (max - min) / 2.0 / median * 100.0
            } else {
                0.0
            },
        })
    }

    /// One line for a terminal.
    pub fn line(&self) -> String {
        format!(
            "{} {} over {} runs: median {:.0} pps, range {:.0}..{:.0} (±{:.1} %)",
            self.search,
            self.goal,
            self.values_pps.len(),
            self.median_pps,
            self.min_pps,
            self.max_pps,
            self.spread_pct
        )
    }
}

/// Steal (CPU time a hypervisor gave to others) that makes a lossy trial
/// disturbed: one tick of /proc/stat. Measured on a 2-core VM (2026-11-27):
/// at 100 kpps through the lab's route DUT, every second that lost frames
/// had a tick of steal on the DUT's CPU, and 8 ticks made one second lose
/// 8.8 %; a 256-frame veth ring overflows in 2.6 ms at that rate.
pub const STEAL_DISTURBS_MS: f64 = 10.0;

/// Whether `lost` frames, offered at `offered_pps`, may all be the host's
/// while the hypervisor held a CPU `steal_ms`: some were lost, the steal
/// is at least [`STEAL_DISTURBS_MS`], and no more were lost than the
/// tester offered in the stolen time plus one tick (the counter's
/// resolution). The rule for a search's trial and a ramp's sample alike.
pub fn stall_explains(lost: f64, offered_pps: f64, steal_ms: f64) -> bool {
    let explained = offered_pps * (steal_ms + STEAL_DISTURBS_MS) / 1e3;
    lost > 0.0 && steal_ms >= STEAL_DISTURBS_MS && lost <= explained
}

/// Whether `lost` frames, offered at `offered_pps`, may all be the host's
/// while the stall watch saw its CPUs held `stall_ms` in all
/// ([`crate::host::stalls`]): some were lost, and no more than the
/// tester offered in the stalled time. A DUT with no buffer at all loses
/// that many in a stall; one with a buffer loses fewer, so loss beyond it
/// is the DUT's.
pub fn watched_stall_explains(lost: f64, offered_pps: f64, stall_ms: f64) -> bool {
    lost > 0.0 && stall_ms > 0.0 && lost <= offered_pps * stall_ms / 1e3
}

/// How often one trial is run again when it was disturbed
/// ([`TrialOutcome::disturbed`]); the last run counts whatever happened,
/// charged with only the loss its disturbance does not explain
/// ([`TrialOutcome::host_lost`]): a host that stalls in every second
/// (seen on a quiet 2-core VM, 2026-11-29: 2–13 ms in nearly every trial)
/// otherwise puts a policed DUT's NDR 7–14 % low, one search in two.
/// Four: on a quiet 2-core VM about one second in three had a stall that
/// explains a small loss, so three runs in a row were all disturbed at
/// about one load in 40, and a search tries several loads near the DUT's
/// limit: against a policer one search in five ended 7-10 % low that way
/// (2026-11-28). Five runs make that about one load in 400; a host that
/// stalls every second still ends, with the answer marked.
pub const DISTURBED_REPEATS: usize = 4;

/// Tester-limited trials lower the highest rate a search may ask for to this
/// much below what the tester managed to offer, so the next trial is one the
/// tester can keep up with (its rate control holds ±1 %).
pub const TESTER_BACKOFF: f64 = 0.02;

/// Checks a rate or duration is a finite positive number.
pub(crate) fn positive(what: &str, v: f64) -> Result<(), SearchError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(SearchError::Config(format!(
            "{what} must be a positive number, got {v}"
        )))
    }
}

/// Checks a ratio is in `[0, 1)`.
pub(crate) fn ratio(what: &str, v: f64) -> Result<(), SearchError> {
    if v.is_finite() && (0.0..1.0).contains(&v) {
        Ok(())
    } else {
        Err(SearchError::Config(format!(
            "{what} must be in [0, 1), got {v}"
        )))
    }
}

#[cfg(test)]
mod tests;
