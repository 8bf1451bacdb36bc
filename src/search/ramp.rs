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
mod tests;
