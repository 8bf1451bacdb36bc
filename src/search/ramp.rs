//! The trex-loadtest method (seeds/001, the Netgate 6100 write-up): a few
//! seconds of warmup at a low rate, then a linear ramp from zero to the
//! target, then a hold at the target; the DUT is saturated where traffic
//! stops coming back. This file owns the schedule and the verdict on the
//! per-second samples; the engine owns sending and counting.

use super::{positive, SearchError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Loss ratio above which a sample counts as lossy: 0.1 %, as graph.rb's
/// `FAIL_THRESHOLD` in trex-loadtest-viz.
pub const DEFAULT_SATURATION_LOSS: f64 = 0.001;

/// Warmup (constant) → ramp (linear from the start rate, 0 unless told, to
/// the target) → hold (target).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RampSpec {
    /// Warmup rate, packets/s (0 for no traffic during the warmup).
    pub warmup_pps: f64,
    pub warmup_s: f64,
    /// Rate the ramp starts from, packets/s: 0 as trex-loadtest does, or a
    /// rate below the DUT's limit so the samples fall where it saturates.
    #[serde(default)]
    pub start_pps: f64,
    /// Rate the ramp ends at and the hold keeps, packets/s.
    pub target_pps: f64,
    pub ramp_s: f64,
    pub hold_s: f64,
}

/// Where in a ramp a moment or a sample lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RampPhase {
    Warmup,
    Ramp,
    Hold,
}

impl RampSpec {
    /// Checks every rate and duration is finite and not negative, and that
    /// there is something to measure after the warmup.
    pub fn validate(&self) -> Result<(), SearchError> {
        let fields = [
            ("warmup rate", self.warmup_pps),
            ("warmup duration", self.warmup_s),
            ("ramp duration", self.ramp_s),
            ("hold duration", self.hold_s),
        ];
        for (what, v) in fields {
            if !(v.is_finite() && v >= 0.0) {
                return Err(SearchError::Config(format!(
                    "ramp {what} must be a number >= 0, got {v}"
                )));
            }
        }
        positive("ramp target rate (pps)", self.target_pps)?;
        if !(self.start_pps.is_finite() && (0.0..=self.target_pps).contains(&self.start_pps)) {
            return Err(SearchError::Config(format!(
                "the ramp's start rate {} pps must be between 0 and its target {} pps",
                self.start_pps, self.target_pps
            )));
        }
        if self.ramp_s + self.hold_s <= 0.0 {
            return Err(SearchError::Config(
                "a ramp needs a ramp or a hold duration above 0 s: nothing would be measured after the warmup"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Length of the whole schedule, warmup included, seconds.
    pub fn total_s(&self) -> f64 {
        self.warmup_s + self.ramp_s + self.hold_s
    }

    /// Phase at `t_s` seconds from the start; `None` before 0 and from the end on.
    pub fn phase_at(&self, t_s: f64) -> Option<RampPhase> {
        if !(0.0..self.total_s()).contains(&t_s) {
            None
        } else if t_s < self.warmup_s {
            Some(RampPhase::Warmup)
        } else if t_s < self.warmup_s + self.ramp_s {
            Some(RampPhase::Ramp)
        } else {
            Some(RampPhase::Hold)
        }
    }

    /// Intended rate at `t_s` seconds from the start, packets/s: the warmup
    /// rate, then `start + (target − start) × (t − warmup) / ramp`, then the
    /// target; 0 outside the schedule.
    pub fn rate_at(&self, t_s: f64) -> f64 {
        match self.phase_at(t_s) {
            None => 0.0,
            Some(RampPhase::Warmup) => self.warmup_pps,
            Some(RampPhase::Ramp) => {
                self.start_pps
                    + (self.target_pps - self.start_pps) * (t_s - self.warmup_s) / self.ramp_s
            }
            Some(RampPhase::Hold) => self.target_pps,
        }
    }

    /// The schedule as piecewise-linear `(t_s, pps)` points, a step being two
    /// points at the same time (the shape of `proto::RateProfile`). The
    /// sender stops at [`RampSpec::total_s`].
    pub fn breakpoints(&self) -> Vec<(f64, f64)> {
        let mut p = Vec::with_capacity(5);
        if self.warmup_s > 0.0 {
            p.push((0.0, self.warmup_pps));
            p.push((self.warmup_s, self.warmup_pps));
        }
        let ramp_end = self.warmup_s + self.ramp_s;
        if self.ramp_s > 0.0 {
            p.push((self.warmup_s, self.start_pps));
        }
        p.push((ramp_end, self.target_pps));
        p.push((self.total_s(), self.target_pps));
        p
    }
}

/// One interval (normally 1 s) of one direction of a ramp.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RampSample {
    /// Start of the interval, seconds since the schedule started.
    pub t_s: f64,
    pub phase: RampPhase,
    /// What the schedule asked for over the interval, packets/s.
    pub intended_pps: f64,
    /// What the tester sent, packets/s.
    pub offered_pps: f64,
    /// What came back, packets/s.
    pub received_pps: f64,
    /// Lost / sent in this interval, from sequence numbers.
    pub loss_ratio: f64,
    /// The tester could not offer the intended rate in this interval.
    #[serde(default)]
    pub tester_limited: bool,
    /// The DUT's CPU time per packet in this interval, where linerate
    /// watches the DUT (the lab's); what it counts is in the ramp test's
    /// `dut_efficiency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut: Option<crate::host::efficiency::DutStep>,
    /// The figures come from a trial run again at `intended_pps` after the
    /// ramp, because the ramp's own interval lost frames the hypervisor's
    /// steal explains ([`RampSample::disturbed`]); `t_s` and `phase` stay
    /// the ramp's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rerun: bool,
}

impl RampSample {
    /// Whether this sample's loss is all the host's: a CPU of the DUT's
    /// host was held long enough meanwhile to lose every frame it lost,
    /// by the hypervisor's steal ([`super::stall_explains`]) or as the
    /// stall watch saw it ([`super::watched_stall_explains`]): the rules of
    /// a search's disturbed trial. Needs the DUT's readings (the lab's DUT).
    pub fn disturbed(&self) -> bool {
        let Some(d) = &self.dut else {
            return false;
        };
        let lost = self.loss_ratio * self.offered_pps * d.duration_s;
        d.steal_ms
            .is_some_and(|ms| super::stall_explains(lost, self.offered_pps, ms))
            || d.stall_ms
                .is_some_and(|ms| super::watched_stall_explains(lost, self.offered_pps, ms))
    }
}

/// Where a ramp saturated: the start of the final unbroken run of lossy
/// samples, a run that lasts to the end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Saturation {
    /// Index of the first sample of the final lossy run, in the slice given.
    pub sample_index: usize,
    pub t_s: f64,
    /// Ramp or hold.
    pub phase: RampPhase,
    /// Rate offered at the saturation point, packets/s.
    pub offered_pps: f64,
    /// Rate received at the saturation point, packets/s.
    pub received_pps: f64,
    /// Offered rate at the saturation point, % of line rate (L1).
    pub offered_line_rate_pct: f64,
    /// Offered rate of the last sample before the run, which was not lossy
    /// (absent when the run starts with the first sample after the warmup).
    pub last_good_offered_pps: Option<f64>,
    /// Samples in the final lossy run.
    pub lossy_samples: usize,
    /// Highest received rate after the warmup, packets/s.
    pub peak_received_pps: f64,
    /// Highest received rate after the warmup, % of line rate (L1).
    pub peak_received_line_rate_pct: f64,
    /// Where inside the first lossy sample the DUT began to drop, packets/s:
    /// the rate whose excess over the rest of the sample's rising rate
    /// accounts for the frames it lost ([`loss_onset_pps`]). Finer than a
    /// sample's step; absent for a sample that did not rise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onset_pps: Option<f64>,
}

/// The rate at which a DUT that forwards at most `C` and drops the excess
/// began to drop inside one sample whose rate rose linearly by `rise_pps`
/// around its mean `offered_pps`, given the share `loss_ratio` it lost:
/// lost = ∫ max(0, r − C) dt over the sample. `None` when the sample did
/// not rise (a hold) or lost nothing.
pub fn loss_onset_pps(offered_pps: f64, rise_pps: f64, loss_ratio: f64) -> Option<f64> {
    if !(rise_pps > 0.0 && loss_ratio > 0.0 && offered_pps > 0.0) {
        return None;
    }
    let (lo, hi) = (
        (offered_pps - rise_pps / 2.0).max(0.0),
        offered_pps + rise_pps / 2.0,
    );
    // Loss inside the sample: the part above C is a triangle of area
    // (hi − C)² / (2 (hi − lo)) per second, or all of it above C.
    let c = hi - (2.0 * (hi - lo) * loss_ratio * offered_pps).sqrt();
    Some(if c > lo {
        c
    } else {
        offered_pps * (1.0 - loss_ratio)
    })
}

/// The verdict on a ramp, whether it saturated or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RampSummary {
    /// Loss ratio above which a sample counted as lossy.
    pub loss_threshold: f64,
    pub saturated: bool,
    /// `saturated at … pps (… % of line rate)` or `not saturated`.
    pub verdict: String,
    pub saturation: Option<Saturation>,
    /// Highest received rate after the warmup, packets/s.
    pub peak_received_pps: f64,
    pub peak_received_line_rate_pct: f64,
    /// Highest offered rate after the warmup, packets/s.
    pub peak_offered_pps: f64,
    /// Samples after the warmup.
    pub samples: usize,
    /// Samples after the warmup lossy above the threshold, anywhere.
    pub lossy_samples: usize,
    /// Samples after the warmup where the tester fell short of the schedule.
    pub tester_limited_samples: usize,
    /// Lossy samples left out of the saturation: the hypervisor's steal
    /// explains their loss ([`RampSample::disturbed`]).
    #[serde(default)]
    pub disturbed_samples: usize,
    /// Not saturated as far as the samples tell, but the last ones all lost
    /// frames while the hypervisor held a CPU: whether the DUT saturated
    /// there is not known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undecided: bool,
    /// Where this ramp and a search of the same profile in the same run
    /// disagree, and why ([`contradictions`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Where a search's PDR goal failed: its relevant upper bound and its
/// loss ratio (0.005 for 0.5 %).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PdrUpper {
    pub load_pps: f64,
    pub loss_ratio: f64,
}

/// How far a ramp held its loss under its threshold: its saturation
/// (where loss began for good), or, not saturated, the highest load it
/// offered after the warmup; with that threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RampHeld {
    pub to_pps: f64,
    pub saturated: bool,
    pub loss_threshold: f64,
}

/// The figures of one profile in one run that must agree: a search's NDR
/// and PDR (what it reports, pps), where its PDR goal failed, and how far a
/// ramp held (where loss began, or its top). Returns a note for each
/// contradiction, with its reason: PDR below NDR; saturation below the NDR
/// the search proved loss-free; or a ramp that kept its loss under a
/// threshold no looser than the PDR's past the load where the search's
/// trials lost more than the PDR allows.
pub fn contradictions(
    ndr_pps: Option<f64>,
    pdr_pps: Option<f64>,
    saturation_pps: Option<f64>,
    pdr_upper: Option<PdrUpper>,
    held: Option<RampHeld>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let (Some(ndr), Some(pdr)) = (ndr_pps, pdr_pps) {
        if pdr < ndr * (1.0 - 1e-9) {
            notes.push(format!(
                "PDR {pdr:.0} pps is below NDR {ndr:.0} pps: the PDR's conditional throughput takes off its trials' loss at the same load; the two agree within that loss"
            ));
        }
    }
    if let (Some(ndr), Some(sat)) = (ndr_pps, saturation_pps) {
        if sat < ndr * (1.0 - 1e-9) {
            notes.push(format!(
                "the ramp saw loss from {sat:.0} pps, below the NDR {ndr:.0} pps the search found loss-free: one ramp sample is a single second, the NDR the share of many trials the exceed ratio allows; the DUT's capacity moved between them (see the search's evidence)"
            ));
        }
    }
    if let (Some(up), Some(h)) = (pdr_upper, held) {
        if h.to_pps > up.load_pps * (1.0 + 1e-9) && h.loss_threshold <= up.loss_ratio {
            let how = if h.saturated {
                format!(
                    "its loss above {} began only at {:.0} pps",
                    pct_text(h.loss_threshold),
                    h.to_pps
                )
            } else {
                format!(
                    "it did not saturate up to {:.0} pps (loss above {} never lasted)",
                    h.to_pps,
                    pct_text(h.loss_threshold)
                )
            };
            notes.push(format!(
                "the ramp held past the PDR's upper bound {:.0} pps, where the search's trials lost more than {}: {how}; one ramp sample is a single second, a bound the share of many trials; the DUT's capacity moved between them (see the search's evidence), and the search's PDR is the lower of the two",
                up.load_pps,
                pct_text(up.loss_ratio),
            ));
        }
    }
    notes
}

/// A loss ratio as the notes print it: 0.005 → "0.5 %".
fn pct_text(ratio: f64) -> String {
    format!("{} %", (ratio * 100.0 * 1e6).round() / 1e6)
}

fn pct(pps: f64, line_rate_pps: f64) -> f64 {
    if line_rate_pps > 0.0 {
        pps / line_rate_pps * 100.0
    } else {
        0.0
    }
}

/// The saturation point of one direction's samples, or `None` ("not
/// saturated") when the last sample after the warmup is not lossy.
///
/// Warmup samples are ignored; a lossy blip that recovers does not count,
/// only a lossy run lasting to the end does. A lossy sample the
/// hypervisor's steal explains ([`RampSample::disturbed`]) is left out: it
/// neither starts a lossy run nor breaks one. `line_rate_pps` is the rate
/// that fills the line at this traffic's frame size, so % of line rate is
/// the L1 share (see `units::line_rate_pps`).
pub fn saturation(
    samples: &[RampSample],
    loss_threshold: f64,
    line_rate_pps: f64,
) -> Option<Saturation> {
    let lossy = |s: &RampSample| s.loss_ratio > loss_threshold;
    let measured: Vec<(usize, &RampSample)> = samples
        .iter()
        .enumerate()
        .filter(|(_, s)| s.phase != RampPhase::Warmup && !(lossy(s) && s.disturbed()))
        .collect();
    let start = final_lossy_run(&measured.iter().map(|(_, s)| lossy(s)).collect::<Vec<_>>())?;
    let run = measured[start..].iter().filter(|(_, s)| lossy(s)).count();
    let (index, at) = measured[start];
    // How much the schedule rose across the sample, from its neighbours
    // in the ramp phase (a hold does not rise).
    let rise = if at.phase == RampPhase::Ramp {
        let next = measured
            .get(start + 1)
            .map(|(_, s)| s.intended_pps - at.intended_pps);
        let prev = start
            .checked_sub(1)
            .map(|i| at.intended_pps - measured[i].1.intended_pps);
        next.filter(|d| *d > 0.0).or(prev).unwrap_or(0.0)
    } else {
        0.0
    };
    let onset = loss_onset_pps(at.offered_pps, rise, at.loss_ratio);
    let peak = measured
        .iter()
        .map(|(_, s)| s.received_pps)
        .fold(0.0, f64::max);
    Some(Saturation {
        sample_index: index,
        t_s: at.t_s,
        phase: at.phase,
        offered_pps: at.offered_pps,
        received_pps: at.received_pps,
        offered_line_rate_pct: pct(at.offered_pps, line_rate_pps),
        last_good_offered_pps: start.checked_sub(1).map(|i| measured[i].1.offered_pps),
        lossy_samples: run,
        peak_received_pps: peak,
        peak_received_line_rate_pct: pct(peak, line_rate_pps),
        onset_pps: onset,
    })
}

/// Where the final lossy run of `lossy` (one flag per sample) starts: it
/// lasts to the end and starts with a lossy sample; a single clean sample
/// between lossy ones does not end it while the run stays at least three
/// quarters lossy (a DUT whose capacity moves with the scheduler clears a
/// second now and then above its limit). `None` when the last is clean.
fn final_lossy_run(lossy: &[bool]) -> Option<usize> {
    let (mut start, mut n_lossy, mut n_clean) = (None, 0usize, 0usize);
    let mut i = lossy.len();
    while i > 0 {
        i -= 1;
        if lossy[i] {
            n_lossy += 1;
            start = Some(i);
        } else {
            let tolerated = i > 0 && lossy[i - 1] && (n_clean + 1) * 4 <= n_lossy + 1;
            if !tolerated || start.is_none() {
                break;
            }
            n_clean += 1;
        }
    }
    start
}

/// [`saturation`] plus the figures a results table shows either way.
pub fn summarize_ramp(
    samples: &[RampSample],
    loss_threshold: f64,
    line_rate_pps: f64,
) -> RampSummary {
    let measured: Vec<&RampSample> = samples
        .iter()
        .filter(|s| s.phase != RampPhase::Warmup)
        .collect();
    let peak_rx = measured.iter().map(|s| s.received_pps).fold(0.0, f64::max);
    let peak_tx = measured.iter().map(|s| s.offered_pps).fold(0.0, f64::max);
    let sat = saturation(samples, loss_threshold, line_rate_pps);
    let disturbed = measured
        .iter()
        .filter(|s| s.loss_ratio > loss_threshold && s.disturbed())
        .count();
    let verdict = match &sat {
        Some(s) => format!(
            "saturated at {:.0} pps offered ({:.2} % of line rate){}, peak {:.0} pps received ({:.2} %)",
            s.offered_pps,
            s.offered_line_rate_pct,
            s.onset_pps
                .map(|o| format!("; loss began near {o:.0} pps inside that sample"))
                .unwrap_or_default(),
            s.peak_received_pps,
            s.peak_received_line_rate_pct
        ),
        None => "not saturated".to_string(),
    };
    // Lossy samples the steal explains after the last one that decides.
    let trailing = measured
        .iter()
        .rev()
        .take_while(|s| s.loss_ratio > loss_threshold && s.disturbed())
        .count();
    let undecided = sat.is_none() && trailing > 0;
    let verdict = if undecided {
        format!(
            "saturation unknown: the last {trailing} sample{} lost frames while the DUT's host stalled long enough to lose them all (steal or the stall watch; run the ramp again)",
            if trailing == 1 { "" } else { "s" }
        )
    } else {
        verdict
    };
    let verdict = if disturbed > 0 && !undecided {
        format!(
            "{verdict}; {disturbed} lossy sample{} left out: the DUT's host stalled long enough to lose all {} lost",
            if disturbed == 1 { "" } else { "s" },
            if disturbed == 1 { "it" } else { "they" }
        )
    } else {
        verdict
    };
    RampSummary {
        loss_threshold,
        saturated: sat.is_some(),
        verdict,
        saturation: sat,
        peak_received_pps: peak_rx,
        peak_received_line_rate_pct: pct(peak_rx, line_rate_pps),
        peak_offered_pps: peak_tx,
        samples: measured.len(),
        lossy_samples: measured
            .iter()
            .filter(|s| s.loss_ratio > loss_threshold)
            .count(),
        tester_limited_samples: measured.iter().filter(|s| s.tester_limited).count(),
        disturbed_samples: disturbed,
        undecided,
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RampSpec {
        RampSpec {
            warmup_pps: 1000.0,
            warmup_s: 5.0,
            start_pps: 0.0,
            target_pps: 100_000.0,
            ramp_s: 10.0,
            hold_s: 5.0,
        }
    }

    #[test]
    fn rate_at_follows_warmup_ramp_hold() {
        let s = spec();
        assert_eq!(s.total_s(), 20.0);
        assert_eq!(s.rate_at(-0.1), 0.0);
        assert_eq!(s.rate_at(0.0), 1000.0);
        assert_eq!(s.rate_at(4.999), 1000.0);
        // The ramp starts from zero, not from the warmup rate.
        assert_eq!(s.rate_at(5.0), 0.0);
        assert_eq!(s.rate_at(7.5), 25_000.0);
        assert_eq!(s.rate_at(14.999), 100_000.0 * 9.999 / 10.0);
        assert_eq!(s.rate_at(15.0), 100_000.0);
        assert_eq!(s.rate_at(19.999), 100_000.0);
        assert_eq!(s.rate_at(20.0), 0.0);
        assert_eq!(s.phase_at(4.0), Some(RampPhase::Warmup));
        assert_eq!(s.phase_at(5.0), Some(RampPhase::Ramp));
        assert_eq!(s.phase_at(15.0), Some(RampPhase::Hold));
        assert_eq!(s.phase_at(20.0), None);
    }

    #[test]
    fn rate_at_without_warmup_or_ramp() {
        let no_warmup = RampSpec {
            warmup_s: 0.0,
            ..spec()
        };
        assert_eq!(no_warmup.rate_at(0.0), 0.0);
        assert_eq!(no_warmup.rate_at(5.0), 50_000.0);
        let hold_only = RampSpec {
            ramp_s: 0.0,
            ..spec()
        };
        assert_eq!(hold_only.rate_at(5.0), 100_000.0);
        assert_eq!(hold_only.phase_at(5.0), Some(RampPhase::Hold));
        assert!(RampSpec {
            ramp_s: 0.0,
            hold_s: 0.0,
            ..spec()
        }
        .validate()
        .is_err());
        assert!(RampSpec {
            target_pps: f64::NAN,
            ..spec()
        }
        .validate()
        .is_err());
        assert!(spec().validate().is_ok());
    }

    #[test]
    fn breakpoints_match_rate_at() {
        let s = spec();
        let p = s.breakpoints();
        assert_eq!(
            p,
            vec![
                (0.0, 1000.0),
                (5.0, 1000.0),
                (5.0, 0.0),
                (15.0, 100_000.0),
                (20.0, 100_000.0)
            ]
        );
        // Interpolating the points (the later point of a step wins) gives rate_at.
        for i in 0..200 {
            let t = i as f64 * 0.1;
            let i = p.iter().rposition(|q| q.0 <= t).unwrap_or(0);
            let want = match p.get(i + 1) {
                Some(b) if b.0 > p[i].0 => p[i].1 + (b.1 - p[i].1) * (t - p[i].0) / (b.0 - p[i].0),
                _ => p[i].1,
            };
            assert!((s.rate_at(t) - want).abs() < 1e-6, "t {t}");
        }
    }

    /// Samples from (phase, offered, loss ratio); received = offered × (1 − loss).
    fn samples(rows: &[(RampPhase, f64, f64)]) -> Vec<RampSample> {
        rows.iter()
            .enumerate()
            .map(|(i, &(phase, offered, loss))| RampSample {
                t_s: i as f64,
                phase,
                intended_pps: offered,
                offered_pps: offered,
                received_pps: offered * (1.0 - loss),
                loss_ratio: loss,
                tester_limited: false,
                dut: None,
                rerun: false,
            })
            .collect()
    }

    use RampPhase::{Hold, Ramp, Warmup};
    const LINE: f64 = 1000.0;

    #[test]
    fn never_saturated() {
        let s = samples(&[
            (Warmup, 10.0, 0.0),
            (Ramp, 100.0, 0.0),
            (Ramp, 500.0, 0.0005), // below 0.1 %
            (Hold, 900.0, 0.0),
        ]);
        assert_eq!(saturation(&s, DEFAULT_SATURATION_LOSS, LINE), None);
        let sum = summarize_ramp(&s, DEFAULT_SATURATION_LOSS, LINE);
        assert!(!sum.saturated);
        assert_eq!(sum.verdict, "not saturated");
        assert_eq!(sum.peak_received_pps, 900.0);
        assert!((sum.peak_received_line_rate_pct - 90.0).abs() < 1e-9);
        assert_eq!(sum.samples, 3);
        assert_eq!(saturation(&[], DEFAULT_SATURATION_LOSS, LINE), None);
    }

    #[test]
    fn saturated_to_the_end_from_the_first_sample() {
        // Lossy from the first sample after the warmup; the lossy warmup
        // itself does not count.
        let s = samples(&[
            (Warmup, 10.0, 0.5),
            (Ramp, 100.0, 0.2),
            (Ramp, 200.0, 0.5),
            (Hold, 300.0, 0.6),
        ]);
        let sat = saturation(&s, DEFAULT_SATURATION_LOSS, LINE).unwrap();
        assert_eq!(sat.sample_index, 1);
        assert_eq!(sat.offered_pps, 100.0);
        assert_eq!(sat.last_good_offered_pps, None);
        assert_eq!(sat.lossy_samples, 3);
        // 300 pps at 60 % loss: 120 pps, the most that came back.
        assert!((sat.peak_received_pps - 120.0).abs() < 1e-9);
    }

    /// A DUT step of one second with `steal_ms` of the hypervisor's.
    fn stolen(steal_ms: f64) -> Option<crate::host::efficiency::DutStep> {
        Some(crate::host::efficiency::DutStep {
            duration_s: 1.0,
            cpu_ns: 0.0,
            packets: 0,
            packets_from: crate::host::efficiency::PacketsFrom::DutTx,
            cpu_ns_per_packet: None,
            clock_hz: None,
            cycles_per_packet: None,
            energy_uj_per_packet: None,
            steal_ms: Some(steal_ms),
            stall_ms: None,
        })
    }

    #[test]
    fn lossy_samples_the_stall_watch_explains_do_not_saturate() {
        // A policer at 500 kpps; at 300 kpps a second lost 400 frames while
        // the watch saw the host's CPUs held 2 ms in all (at most 600
        // frames' worth), with no steal tick: the host's, not the DUT's.
        let mut s = samples(&[
            (Ramp, 100_000.0, 0.0),
            (Ramp, 200_000.0, 0.0),
            (Ramp, 300_000.0, 400.0 / 300_000.0),
            (Ramp, 400_000.0, 0.0),
            (Ramp, 500_000.0, 0.0),
            (Ramp, 600_000.0, 0.15),
            (Hold, 700_000.0, 0.3),
        ]);
        let watched = |steal: f64, stall: f64| {
            stolen(steal).map(|d| crate::host::efficiency::DutStep {
                stall_ms: Some(stall),
                ..d
            })
        };
        // Two more such seconds before the limit: without the watch they
        // decide the ramp, at 300 kpps.
        s[3].loss_ratio = 0.002;
        s[4].loss_ratio = 0.002;
        assert_eq!(
            saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
                .unwrap()
                .sample_index,
            2,
            "without the watch the ramp saturates at 300 kpps"
        );
        // Left out, the saturation is the policer's.
        s[2].dut = watched(0.0, 2.0);
        assert!(s[2].disturbed());
        s[3].dut = watched(0.0, 2.5);
        s[4].dut = watched(0.0, 2.5);
        let sat = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
        assert_eq!(sat.sample_index, 5, "{sat:?}");
        assert_eq!(
            summarize_ramp(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).disturbed_samples,
            3
        );
        // More loss than the stalled time holds is the DUT's.
        s[4].dut = watched(0.0, 0.5);
        assert!(!s[4].disturbed());
        assert_eq!(
            saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
                .unwrap()
                .sample_index,
            4
        );
        // No watch (absent), no steal: nothing is explained.
        s[2].dut = stolen(0.0);
        assert!(!s[2].disturbed());
    }

    #[test]
    fn lossy_samples_the_hypervisors_steal_explains_do_not_saturate() {
        // 100 kpps steps; the DUT's real limit is 500 kpps. At 200 and 300
        // kpps the hypervisor held a CPU 60 ms and 1.5 % / 2 % were lost:
        // at most 70 ms of frames (7 %), all the host's.
        let rows = [
            (Ramp, 100_000.0, 0.0),
            (Ramp, 200_000.0, 0.015),
            (Ramp, 300_000.0, 0.02),
            (Ramp, 400_000.0, 0.0),
            (Ramp, 500_000.0, 0.0),
            (Ramp, 600_000.0, 0.15),
            (Hold, 700_000.0, 0.3),
        ];
        let mut s = samples(&rows);
        let plain = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
        assert_eq!(plain.sample_index, 5, "two clean seconds end the early run");
        // The same stalls right before the real limit: without the steal the
        // ramp saturates at 300 kpps, 200 kpps early.
        s[3].loss_ratio = 0.01;
        s[4].loss_ratio = 0.012;
        let early = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
        assert_eq!(early.sample_index, 1);
        for x in &mut s[1..5] {
            x.dut = stolen(60.0);
        }
        let sat = saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
        assert_eq!(sat.sample_index, 5, "{sat:?}");
        assert_eq!(sat.last_good_offered_pps, Some(100_000.0));
        let sum = summarize_ramp(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0);
        assert_eq!(sum.disturbed_samples, 4);
        assert!(
            sum.verdict.contains("4 lossy samples left out"),
            "{}",
            sum.verdict
        );
        // Loss beyond what the stolen time holds is the DUT's: 15 % at
        // 600 kpps with 60 ms stolen still saturates there.
        s[5].dut = stolen(60.0);
        assert_eq!(
            saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
                .unwrap()
                .sample_index,
            5
        );
        // Stalls through the end: nothing decides whether it saturated.
        let mut top = s.clone();
        top[5].loss_ratio = 0.05;
        top[6].loss_ratio = 0.05;
        top[6].dut = stolen(60.0);
        let sum = summarize_ramp(&top, DEFAULT_SATURATION_LOSS, 14_880_952.0);
        assert!(!sum.saturated && sum.undecided, "{sum:?}");
        assert!(
            sum.verdict
                .starts_with("saturation unknown: the last 6 samples"),
            "{}",
            sum.verdict
        );
        // Less than a tick of steal explains nothing.
        for x in &mut s[1..5] {
            x.dut = stolen(0.0);
        }
        assert_eq!(
            saturation(&s, DEFAULT_SATURATION_LOSS, 14_880_952.0)
                .unwrap()
                .sample_index,
            1
        );
    }

    #[test]
    fn blip_then_recovery_is_not_saturation() {
        let s = samples(&[
            (Ramp, 100.0, 0.0),
            (Ramp, 200.0, 0.05), // blip
            (Ramp, 300.0, 0.0),
            (Hold, 400.0, 0.0),
        ]);
        assert_eq!(saturation(&s, DEFAULT_SATURATION_LOSS, LINE), None);
        assert_eq!(
            summarize_ramp(&s, DEFAULT_SATURATION_LOSS, LINE).lossy_samples,
            1
        );
        // A blip earlier, then a final lossy run: the run counts, the blip does not.
        let s = samples(&[
            (Ramp, 100.0, 0.0),
            (Ramp, 200.0, 0.05),
            (Ramp, 300.0, 0.0),
            (Ramp, 400.0, 0.01),
            (Hold, 500.0, 0.2),
        ]);
        let sat = saturation(&s, DEFAULT_SATURATION_LOSS, LINE).unwrap();
        assert_eq!(sat.sample_index, 3);
        assert_eq!(sat.offered_pps, 400.0);
        assert_eq!(sat.last_good_offered_pps, Some(300.0));
    }

    #[test]
    fn saturation_starting_in_the_ramp_reports_its_rate() {
        let s = samples(&[
            (Warmup, 10.0, 0.0),
            (Ramp, 100.0, 0.0),
            (Ramp, 200.0, 0.0),
            (Ramp, 300.0, 0.002),
            (Ramp, 400.0, 0.25),
            (Hold, 500.0, 0.4),
            (Hold, 500.0, 0.4),
        ]);
        let sat = saturation(&s, DEFAULT_SATURATION_LOSS, LINE).unwrap();
        assert_eq!(sat.phase, Ramp);
        assert_eq!(sat.sample_index, 3);
        assert_eq!(sat.offered_pps, 300.0);
        assert!((sat.offered_line_rate_pct - 30.0).abs() < 1e-9);
        assert_eq!(sat.lossy_samples, 4);
        // Peak received is 400 × 0.75 = 300 pps, 30 % of the line.
        assert!((sat.peak_received_pps - 300.0).abs() < 1e-9);
        assert!((sat.peak_received_line_rate_pct - 30.0).abs() < 1e-9);
        let sum = summarize_ramp(&s, DEFAULT_SATURATION_LOSS, LINE);
        assert!(sum.saturated);
        assert!(
            sum.verdict.starts_with("saturated at 300 pps"),
            "{}",
            sum.verdict
        );
    }

    #[test]
    fn threshold_is_strictly_above() {
        let s = samples(&[(Ramp, 100.0, 0.0), (Hold, 100.0, 0.001)]);
        assert_eq!(saturation(&s, 0.001, LINE), None);
        assert!(saturation(&s, 0.0005, LINE).is_some());
    }

    /// Issue 33: a ramp through a policed DUT whose first lossy sample is
    /// coarse still places the saturation within a few percent of the
    /// policer, from the frames that sample lost.
    #[test]
    fn onset_inside_a_coarse_sample_finds_the_policer() {
        use crate::search::sim::{SimConfig, SimDut};
        for capacity in [61_000.0, 333_333.0, 1_234_567.0] {
            let spec = RampSpec {
                warmup_pps: capacity * 0.05,
                warmup_s: 1.0,
                start_pps: 0.0,
                target_pps: capacity * 4.3,
                ramp_s: 8.0,
                hold_s: 1.0,
            };
            let samples = SimDut::new(SimConfig {
                capacity_pps: capacity,
                ..SimConfig::default()
            })
            .ramp_samples(&spec);
            let sat = saturation(&samples, DEFAULT_SATURATION_LOSS, 14_880_952.0).unwrap();
            let onset = sat.onset_pps.unwrap();
            assert!(
                (onset - capacity).abs() <= 0.03 * capacity,
                "{capacity}: {sat:?}"
            );
            // The sample's own rate is a step away: the onset is the finer figure.
            assert!(
                (sat.offered_pps - capacity).abs() > 0.03 * capacity,
                "{sat:?}"
            );
        }
        assert_eq!(loss_onset_pps(100.0, 0.0, 0.1), None);
        assert_eq!(loss_onset_pps(100.0, 10.0, 0.0), None);
        // Entirely above C: the mean less what was lost.
        assert_eq!(loss_onset_pps(100.0, 10.0, 0.5), Some(50.0));
    }

    #[test]
    fn contradictions_are_named_with_their_reason() {
        assert!(contradictions(Some(100.0), Some(120.0), Some(110.0), None, None).is_empty());
        assert!(contradictions(None, None, Some(1.0), None, None).is_empty());
        let n = contradictions(Some(100.0), Some(99.0), Some(80.0), None, None);
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(n[0].contains("PDR 99 pps is below NDR 100"), "{n:?}");
        assert!(
            n[1].contains("loss from 80 pps, below the NDR 100"),
            "{n:?}"
        );
    }

    #[test]
    fn a_ramp_that_held_past_the_pdrs_upper_bound_is_a_contradiction() {
        let up = PdrUpper {
            load_pps: 364_841.0,
            loss_ratio: 0.005,
        };
        let held = |to_pps: f64, saturated: bool| RampHeld {
            to_pps,
            saturated,
            loss_threshold: 0.001,
        };
        // Not saturated up to 541 k, the search failed 0.5 % at 365 k.
        let n = contradictions(
            Some(360_500.0),
            Some(360_500.0),
            None,
            Some(up),
            Some(held(541_441.0, false)),
        );
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains("upper bound 364841 pps"), "{n:?}");
        assert!(n[0].contains("more than 0.5 %"), "{n:?}");
        assert!(n[0].contains("did not saturate up to 541441 pps"), "{n:?}");
        // Saturated above it: the same contradiction, said so.
        let n = contradictions(None, None, None, Some(up), Some(held(400_000.0, true)));
        assert!(n[0].contains("began only at 400000 pps"), "{n:?}");
        // Saturated at or below the bound: they agree.
        assert!(contradictions(None, None, None, Some(up), Some(held(364_841.0, true))).is_empty());
        assert!(
            contradictions(None, None, None, Some(up), Some(held(300_000.0, false))).is_empty()
        );
        // A ramp threshold looser than the PDR's proves nothing about it.
        let loose = RampHeld {
            loss_threshold: 0.01,
            ..held(541_441.0, false)
        };
        assert!(contradictions(None, None, None, Some(up), Some(loose)).is_empty());
    }

    #[test]
    fn one_clean_second_in_a_lossy_run_does_not_end_it() {
        let f = |v: &[u8]| final_lossy_run(&v.iter().map(|&b| b == 1).collect::<Vec<_>>());
        assert_eq!(f(&[0, 0, 1, 1, 1, 0, 1, 1, 1]), Some(2));
        // Clean at the end, or two clean in a row, end it.
        assert_eq!(f(&[0, 1, 1, 1, 0]), None);
        assert_eq!(f(&[1, 1, 1, 0, 0, 1, 1]), Some(5));
        // More than one in four clean ends it.
        assert_eq!(f(&[1, 0, 1, 0, 1]), Some(4));
        assert_eq!(f(&[]), None);
    }
}
