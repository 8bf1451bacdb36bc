//! RFC 2544 throughput (§26.1: the fastest rate at which no frame is lost,
//! found by binary search) and frame loss rate (§26.3: loss at 100 %, 90 %,
//! … of the maximum rate until two successive trials lose nothing), with the
//! §23 waits around every trial and the §24 trial duration (60 s).
//!
//! A result says whether it is RFC 2544 compliant and, when not, why
//! (shorter trials or waits, an acceptable loss above zero).

use super::{
    positive, ratio, SearchError, SearchTrial, TrialLog, TrialOutcome, TrialRunner, TrialWaits,
    TESTER_BACKOFF,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// RFC 2544 §24: "the duration of the test portion of each trial SHOULD be
/// at least 60 seconds".
pub const RFC2544_TRIAL_S: f64 = 60.0;

/// When a binary search may stop: the bracket [passed, failed] is this narrow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Failed − passed ≤ this many packets/s.
    Pps(f64),
    /// (Failed − passed) / failed ≤ this ratio.
    Relative(f64),
}

impl Resolution {
    fn reached(&self, passed: f64, failed: f64) -> bool {
        match *self {
            Resolution::Pps(p) => failed - passed <= p,
            Resolution::Relative(r) => (failed - passed) / failed <= r,
        }
    }
}

/// Binary search for the RFC 2544 throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rfc2544Config {
    /// Lowest rate to try, packets/s.
    pub min_pps: f64,
    /// Highest rate to try (the first trial), packets/s: normally the line
    /// rate at this frame size, or the tester's self-test capacity.
    pub max_pps: f64,
    /// Sending phase of each trial, seconds (RFC: at least 60).
    pub trial_duration_s: f64,
    /// Loss ratio a trial may show and still pass (RFC 2544: 0).
    pub acceptable_loss_ratio: f64,
    pub resolution: Resolution,
    pub waits: TrialWaits,
    /// Give up after this many trials.
    pub max_trials: usize,
}

impl Rfc2544Config {
    /// RFC defaults between two rates: 60 s trials, zero loss, the §23
    /// waits, a 0.5 % relative resolution.
    pub fn new(min_pps: f64, max_pps: f64) -> Self {
        Rfc2544Config {
            min_pps,
            max_pps,
            trial_duration_s: RFC2544_TRIAL_S,
            acceptable_loss_ratio: 0.0,
            resolution: Resolution::Relative(0.005),
            waits: TrialWaits::RFC2544,
            max_trials: 64,
        }
    }

    fn validate(&self) -> Result<(), SearchError> {
        positive("minimum rate (pps)", self.min_pps)?;
        positive("maximum rate (pps)", self.max_pps)?;
        if self.min_pps > self.max_pps {
            return Err(SearchError::Config(format!(
                "minimum rate {} pps is above maximum rate {} pps: swap them",
                self.min_pps, self.max_pps
            )));
        }
        positive("trial duration (s)", self.trial_duration_s)?;
        ratio("acceptable loss ratio", self.acceptable_loss_ratio)?;
        match self.resolution {
            Resolution::Pps(p) => positive("resolution (pps)", p)?,
            Resolution::Relative(r) => {
                positive("relative resolution", r)?;
                ratio("relative resolution", r)?;
            }
        }
        if self.max_trials == 0 {
            return Err(SearchError::Config("max_trials must be at least 1".into()));
        }
        self.waits.validate()
    }

    fn compliance_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.trial_duration_s < RFC2544_TRIAL_S {
            notes.push(format!(
                "trials last {} s; RFC 2544 §24 asks for at least {RFC2544_TRIAL_S} s",
                self.trial_duration_s
            ));
        }
        if self.acceptable_loss_ratio > 0.0 {
            notes.push(format!(
                "trials pass with up to {} % loss; RFC 2544 throughput allows none (this is a partial drop rate)",
                self.acceptable_loss_ratio * 100.0
            ));
        }
        notes.extend(self.waits.shorter_than_rfc2544());
        notes
    }
}

/// How a throughput search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThroughputEnd {
    /// The highest passing and lowest failing rates are within the resolution.
    Found,
    /// The maximum rate passed: the DUT forwards at least that much.
    MaxRatePassed,
    /// The tester could not offer more than the reported throughput: the
    /// answer is the tester's limit, not the DUT's.
    TesterLimit,
    /// Even the minimum rate lost frames.
    MinRateFailed,
    /// Stopped at `max_trials` before the resolution was reached.
    TrialLimit,
}

/// An RFC 2544 throughput result, as it goes into results.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rfc2544Result {
    pub config: Rfc2544Config,
    /// Highest rate that passed, packets/s (absent when none did).
    pub throughput_pps: Option<f64>,
    /// Lowest rate that failed, packets/s (absent when none did).
    pub lowest_failed_pps: Option<f64>,
    pub end: ThroughputEnd,
    /// Highest rate the tester could offer, when a trial hit its limit.
    pub tester_limit_pps: Option<f64>,
    /// Trials whose outcome contradicted an earlier one (a loss at or
    /// below a rate that had passed, or a pass at or above one that had
    /// lost). More than none says the DUT's loss-free rate moved while it
    /// was measured.
    #[serde(default)]
    pub contradicting_trials: usize,
    /// Trials of at least 60 s, zero loss and the full §23 waits.
    pub rfc2544_compliant: bool,
    /// Why the result is not RFC 2544 compliant (empty when it is).
    pub compliance_notes: Vec<String>,
    pub trials: Vec<SearchTrial>,
    /// Sum of trial durations, seconds.
    pub trial_time_s: f64,
    /// Sum of the configured waits, seconds.
    pub wait_time_s: f64,
    pub time_spent_s: f64,
}

/// A throughput search's state between trials: its bracket, what the
/// tester showed it can offer, and the trials that contradicted others.
#[derive(Default)]
struct Bracket {
    passed: Option<f64>,
    failed: Option<f64>,
    ceiling: f64,
    tester_limit: Option<f64>,
    demonstrated: f64,
    shortfalls: super::Shortfalls,
    contradicting: usize,
}

impl Bracket {
    /// The next trial's rate and purpose, or how the search ends.
    fn next(&self, config: &Rfc2544Config) -> Result<(f64, &'static str), ThroughputEnd> {
        let (passed, failed, ceiling) = (self.passed, self.failed, self.ceiling);
        // The top of the bracket: the lowest failure, or the ceiling if that
        // is lower and untested.
        let top_tested = failed.is_some_and(|f| f <= ceiling);
        if passed.is_some_and(|p| p >= ceiling) {
            // The tester's limit only when the DUT lost nothing up to it;
            // with a failure above, the DUT bounds the answer from above.
            Err(if self.tester_limit.is_some() && failed.is_some() {
                ThroughputEnd::Found
            } else if self.tester_limit.is_some() {
                ThroughputEnd::TesterLimit
            } else {
                ThroughputEnd::MaxRatePassed
            })
        } else if ceiling < config.min_pps {
            Err(ThroughputEnd::TesterLimit)
        } else if !top_tested {
            let what = if self.tester_limit.is_some() {
                "tester limit"
            } else {
                "max rate"
            };
            Ok((ceiling, what))
        } else {
            let top = failed.unwrap_or(ceiling).min(ceiling);
            let bottom = passed.unwrap_or(config.min_pps);
            if top <= config.min_pps {
                return Err(ThroughputEnd::MinRateFailed);
            }
            if config.resolution.reached(bottom, top) {
                if passed.is_some() {
                    return Err(ThroughputEnd::Found);
                }
                Ok((config.min_pps, "min rate"))
            } else {
                Ok(((bottom + top) / 2.0, "bisect"))
            }
        }
    }

    /// Takes a trial at `rate` into the bracket.
    fn record(&mut self, config: &Rfc2544Config, rate: f64, o: &TrialOutcome) {
        // A tester that fell short ran the trial at the load it offered.
        // A failure there is the DUT's, at the rate offered, whatever was
        // asked. A pass holds at what was offered: it counts at the new
        // ceiling just below that, and no more can be asked for. Short by
        // less than the backoff is jitter at the rate asked.
        // As MLRsearch does, the ceiling comes down only when two
        // shortfalls show one ([`super::Shortfalls`]), and never below a
        // rate the tester has offered in full.
        let pass = o.loss_ratio() <= config.acceptable_loss_ratio;
        let offered = o.offered_pps.min(rate);
        let short = o.short_of_asked();
        let ceiling_shown = short
            && self
                .shortfalls
                .show_a_ceiling(rate, offered, false, o.lost == 0);
        if !short {
            self.demonstrated = self.demonstrated.max(rate);
        }
        let rate = match (pass, short) {
            (_, false) => rate,
            (false, true) => offered,
            (true, true) => {
                let best = self.shortfalls.best_offered().max(offered);
                let most = (best * (1.0 - TESTER_BACKOFF)).max(self.demonstrated);
                if ceiling_shown && most < self.ceiling {
                    self.ceiling = most;
                    self.tester_limit = Some(self.ceiling);
                }
                // The pass counts at what this trial offered.
                (offered * (1.0 - TESTER_BACKOFF))
                    .max(self.demonstrated)
                    .min(offered)
            }
        };
        // A binary search assumes that loss only grows with the load. A
        // trial that contradicts an earlier one (a pass at or above a
        // failure, a failure at or below a pass: a DUT whose capacity
        // moved, or a disturbed host) is counted, and the search's line
        // says so. The bracket is not reset on it: resetting made the
        // search chase the noise (a simulated DUT with 6 % tester
        // shortfalls and stalls took up to 56 trials instead of 31). A
        // search that ends with even the lowest load failed reports no
        // throughput, whatever passed above it before.
        if pass {
            if self.failed.is_some_and(|f| f <= rate) {
                self.contradicting += 1;
            }
            self.passed = Some(self.passed.map_or(rate, |p: f64| p.max(rate)));
        } else {
            if self.passed.is_some_and(|p| p >= rate) {
                self.contradicting += 1;
            }
            self.failed = Some(self.failed.map_or(rate, |f: f64| f.min(rate)));
        }
    }
}

/// RFC 2544 §26.1 throughput by binary search between `min_pps` and
/// `max_pps`: the first trial runs at the maximum, then the bracket between
/// the highest passing and lowest failing rate is halved until it is within
/// the resolution; the minimum is tried last if nothing passed on the way.
///
/// A trial the tester could not offer in full is a trial at the load it
/// offered: a failure there is the DUT's at that load. A pass lowers the
/// highest rate tried to [`TESTER_BACKOFF`] below what the tester managed;
/// when a rate at that ceiling passes and no trial failed, the answer is
/// the tester's limit ([`ThroughputEnd::TesterLimit`]), not the DUT's.
pub fn rfc2544_throughput(
    runner: &mut dyn TrialRunner,
    config: &Rfc2544Config,
) -> Result<Rfc2544Result, SearchError> {
    config.validate()?;
    let mut log = TrialLog::default();
    let mut b = Bracket {
        ceiling: config.max_pps,
        ..Bracket::default()
    };
    let end = loop {
        let (rate, purpose) = match b.next(config) {
            Ok(next) => next,
            Err(end) => break end,
        };
        if log.trials.len() >= config.max_trials {
            break ThroughputEnd::TrialLimit;
        }
        let t = log.run(
            runner,
            rate,
            config.trial_duration_s,
            &config.waits,
            purpose.to_string(),
            None,
        )?;
        b.record(config, rate, &t.outcome);
    };
    let mut compliance_notes = config.compliance_notes();
    compliance_notes.extend(disturbed_note(log.disturbed));
    // Every rate that passed lies above a failure at or below the lowest
    // load: none is a throughput.
    if end == ThroughputEnd::MinRateFailed {
        b.passed = None;
    }
    Ok(Rfc2544Result {
        config: *config,
        throughput_pps: b.passed,
        lowest_failed_pps: b.failed,
        end,
        tester_limit_pps: b.tester_limit,
        contradicting_trials: b.contradicting,
        rfc2544_compliant: compliance_notes.is_empty(),
        compliance_notes,
        trial_time_s: log.trial_time_s,
        wait_time_s: log.wait_time_s,
        time_spent_s: log.time_spent_s(),
        trials: log.trials,
    })
}

/// Trials run again because the hypervisor held a CPU while they lost
/// frames: RFC 2544 counts every trial, so the result says so.
fn disturbed_note(n: usize) -> Option<String> {
    (n > 0).then(|| {
        format!(
            "{n} trial{} lost frames while the hypervisor held a CPU of the test's hosts and \
             {} run again (RFC 2544 counts every trial; see each trial's steal_ms)",
            if n == 1 { "" } else { "s" },
            if n == 1 { "was" } else { "were" }
        )
    })
}

/// RFC 2544 §26.3 frame loss rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FrameLossConfig {
    /// The 100 % rate: the maximum rate for the frame size on the medium, pps.
    pub max_pps: f64,
    /// Step between trials, % of the maximum (RFC: at most 10, finer is encouraged).
    pub step_pct: f64,
    pub trial_duration_s: f64,
    pub waits: TrialWaits,
}

impl FrameLossConfig {
    /// RFC defaults: 10 % steps, 60 s trials, the §23 waits.
    pub fn new(max_pps: f64) -> Self {
        FrameLossConfig {
            max_pps,
            step_pct: 10.0,
            trial_duration_s: RFC2544_TRIAL_S,
            waits: TrialWaits::RFC2544,
        }
    }
}

/// One rate of a frame loss rate test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FrameLossStep {
    /// % of the maximum rate.
    pub percent_of_max: f64,
    pub rate_pps: f64,
    /// ((input − output) × 100) / input, from sequence numbers.
    pub frame_loss_pct: f64,
    /// The tester could not offer this rate: the step does not count
    /// towards the two lossless trials that end the test.
    pub tester_limited: bool,
    /// Index into the result's trials.
    pub trial_index: usize,
}

/// Why a frame loss rate test stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FrameLossEnd {
    /// Two successive trials lost no frame (§26.3).
    TwoLosslessTrials,
    /// The lowest step (one step above 0 %) was run.
    LowestStep,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FrameLossResult {
    pub config: FrameLossConfig,
    pub steps: Vec<FrameLossStep>,
    pub end: FrameLossEnd,
    pub rfc2544_compliant: bool,
    pub compliance_notes: Vec<String>,
    pub trials: Vec<SearchTrial>,
    pub trial_time_s: f64,
    pub wait_time_s: f64,
    pub time_spent_s: f64,
}

/// RFC 2544 §26.3: the first trial at 100 % of the maximum rate, then 90 %,
/// 80 % … (by `step_pct`), until two successive trials lose no frame.
pub fn frame_loss_rate(
    runner: &mut dyn TrialRunner,
    config: &FrameLossConfig,
) -> Result<FrameLossResult, SearchError> {
    positive("maximum rate (pps)", config.max_pps)?;
    positive("step (% of maximum)", config.step_pct)?;
    positive("trial duration (s)", config.trial_duration_s)?;
    // Finer than 1 % would mean hundreds of trials of a minute each.
    if !(1.0..=100.0).contains(&config.step_pct) {
        return Err(SearchError::Config(format!(
            "frame loss step {} % is outside 1..100 %: use 10 or finer (RFC 2544 §26.3)",
            config.step_pct
        )));
    }
    config.waits.validate()?;
    let mut log = TrialLog::default();
    let mut steps = Vec::new();
    let mut lossless_in_a_row = 0;
    let mut end = FrameLossEnd::LowestStep;
    for k in 0.. {
        // Integer steps, so 100 − 10 × k does not drift.
        let pct = 100.0 - f64::from(k) * config.step_pct;
        if pct <= 1e-9 {
            break;
        }
        let rate = config.max_pps * pct / 100.0;
        let t = log.run(
            runner,
            rate,
            config.trial_duration_s,
            &config.waits,
            format!("{pct:.1} % of max"),
            None,
        )?;
        let o = &t.outcome;
        steps.push(FrameLossStep {
            percent_of_max: pct,
            rate_pps: rate,
            frame_loss_pct: o.loss_ratio() * 100.0,
            tester_limited: o.tester_limited,
            trial_index: t.index,
        });
        if o.charged_lost() == 0 && !o.short_of_asked() {
            lossless_in_a_row += 1;
        } else {
            lossless_in_a_row = 0;
        }
        if lossless_in_a_row == 2 {
            end = FrameLossEnd::TwoLosslessTrials;
            break;
        }
    }
    let mut notes = Vec::new();
    if config.step_pct > 10.0 {
        notes.push(format!(
            "steps of {} %; RFC 2544 §26.3 asks for at most 10 %",
            config.step_pct
        ));
    }
    if config.trial_duration_s < RFC2544_TRIAL_S {
        notes.push(format!(
            "trials last {} s; RFC 2544 §24 asks for at least {RFC2544_TRIAL_S} s",
            config.trial_duration_s
        ));
    }
    notes.extend(config.waits.shorter_than_rfc2544());
    notes.extend(disturbed_note(log.disturbed));
    Ok(FrameLossResult {
        config: *config,
        steps,
        end,
        rfc2544_compliant: notes.is_empty(),
        compliance_notes: notes,
        trial_time_s: log.trial_time_s,
        wait_time_s: log.wait_time_s,
        time_spent_s: log.time_spent_s(),
        trials: log.trials,
    })
}

#[cfg(test)]
mod tests;
